// The exception for communication failures; main maps it to exit code 3.
#pragma once

#include <stdexcept>
#include <string>

namespace diloco::comm {

class CommError : public std::runtime_error {
 public:
  CommError(const std::string& what, int rank) : std::runtime_error(what), rank_(rank) {}
  // World rank that observed the failure, or -1 when unknown.
  int rank() const { return rank_; }

 private:
  int rank_;
};

}  // namespace diloco::comm
