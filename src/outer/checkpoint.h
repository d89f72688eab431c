// Checkpoints at round boundaries: a folder per checkpoint, every file written
// atomically with its CRC32C in a manifest that is written last, so a folder
// either verifies completely or is not used.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace diloco::outer {

// A checkpoint that cannot be written or read; main maps it to exit code 2.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointFile {
  std::string name;
  std::uint64_t size = 0;
  std::uint32_t crc32c = 0;
};

// Little-endian binary records with a tag per field, so a reader names what
// is missing or malformed.
class BlobWriter {
 public:
  void u64(std::uint64_t v);
  void f64(double v);
  void floats(std::span<const float> v);
  void bytes(const std::string& v);
  const std::string& data() const { return data_; }

 private:
  std::string data_;
};

class BlobReader {
 public:
  BlobReader(std::string data, std::string source) : data_(std::move(data)), source_(std::move(source)) {}
  std::uint64_t u64(const char* what);
  double f64(const char* what);
  std::vector<float> floats(const char* what);
  std::string bytes(const char* what);
  void expect_end();

 private:
  void need(std::size_t n, const char* what);
  std::string data_;
  std::string source_;
  std::size_t pos_ = 0;
};

class CheckpointStore {
 public:
  // `keep` newest checkpoints are kept; older ones are removed after a new
  // one is published.
  CheckpointStore(std::string dir, int keep) : dir_(std::move(dir)), keep_(keep) {}

  const std::string& dir() const { return dir_; }
  std::string staging_dir(int round) const;
  std::string final_dir(int round) const;

  // Writes `data` to dir/name through a temporary file, fsync and rename.
  static CheckpointFile write_file(const std::string& dir, const std::string& name, const std::string& data);
  static std::string read_file(const std::string& path);

  // Writes the manifest into the staging folder, then renames the folder to
  // its final name and prunes old checkpoints. Throws CheckpointError.
  void publish(int round, const std::vector<CheckpointFile>& files) const;

  // Checkpoint folders, newest first (by round).
  std::vector<std::string> list() const;

  // Empty when `path` verifies (manifest, sizes, checksums); else why not.
  static std::string verify(const std::string& path);
  static int round_of(const std::string& path);
  static std::vector<CheckpointFile> manifest(const std::string& path);

  // The newest checkpoint that verifies; each skipped one adds a warning.
  std::optional<std::string> newest_valid(std::vector<std::string>& warnings) const;

 private:
  std::string dir_;
  int keep_;
};

}  // namespace diloco::outer
