// The planner's one error: an input it cannot use (a cluster or links file,
// a goal, a codec name), with the file and field at fault in its message.
// The commands map it to exit code 2, as a recipe error.
#pragma once

#include <stdexcept>
#include <string>

namespace diloco::plan {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace diloco::plan
