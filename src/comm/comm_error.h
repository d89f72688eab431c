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

// A peer between sites launched apart did not answer within the deadline,
// or another site declared the membership broken. MPI reports neither (a
// dead or frozen peer across joined jobs just never answers), so the wait
// that noticed throws this and the membership decides who is still there.
class PeerLost : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace diloco::comm
