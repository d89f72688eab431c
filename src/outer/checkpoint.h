// Checkpoints at round boundaries: a folder per checkpoint, every file written
// atomically with its CRC32C in a manifest that is written last, so a folder
// either verifies completely or is not used.
#pragma once

#include <cstdint>
#include <functional>
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
  // A count of items of at least `item_bytes` each, checked against what the
  // file still holds before anyone allocates for it.
  std::uint64_t count(const char* what, std::size_t item_bytes);
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
  // After a new checkpoint is published, checkpoints older than it are
  // removed until `keep` remain (it included); newer ones are never touched
  // (set_aside_newer_than moves them out of the way first).
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

  // The newest checkpoint that verifies and that `usable` accepts (empty
  // string: yes; else why not); each skipped one adds a warning.
  std::optional<std::string> newest_valid(std::vector<std::string>& warnings,
                                          const std::function<std::string(const std::string&)>& usable = {}) const;

  // A run that continues from `round` (0: a fresh start) abandons the future
  // of any checkpoint newer than that: such checkpoints move, whole, into a
  // new folder dir/abandoned-<UTC time>/ (never deleted), where neither
  // --resume auto nor pruning sees them. Returns the folder, or "" if nothing
  // was newer. Throws CheckpointError.
  std::string set_aside_newer_than(int round) const;

 private:
  std::string dir_;
  int keep_;
};

}  // namespace diloco::outer
