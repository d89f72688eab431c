// `diloco inspect CKPT`: verify a checkpoint and print what it holds.
#pragma once

#include <string>

namespace diloco::app {

// 0 when the checkpoint verifies, 2 when it does not (printed why).
int run_inspect(const std::string& path);

}  // namespace diloco::app
