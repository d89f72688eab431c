// Checkpoint inspection: manifest, per-file checksums, and the global state.
#include "app/inspect_command.h"

#include <iostream>

#include "outer/checkpoint.h"
#include "outer/trainer.h"

namespace diloco::app {

int run_inspect(const std::string& path) {
  using outer::CheckpointStore;
  // Sizes and checksums first: a damaged file is named as such before its
  // content is read.
  const std::string problem = CheckpointStore::verify(path);
  if (!problem.empty()) {
    std::cerr << "diloco: error: checkpoint " << path << " does not verify: " << problem << std::endl;
    return 2;
  }
  try {
    const auto files = CheckpointStore::manifest(path);
    std::cout << "checkpoint   " << path << "\n";
    std::cout << outer::Trainer::describe_checkpoint(path);
    std::cout << "files\n";
    for (const auto& f : files) std::cout << "  " << f.name << "  " << f.size << " bytes  crc32c " << f.crc32c << "\n";
  } catch (const outer::CheckpointError& e) {
    std::cerr << "diloco: error: checkpoint: " << e.what() << std::endl;
    return 2;
  }
  std::cout << "verified: every file matches its size and checksum\n";
  return 0;
}

}  // namespace diloco::app
