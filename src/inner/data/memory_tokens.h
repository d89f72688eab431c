// Token ids held in memory (the bytes and SentencePiece-text formats), and
// the plain-text file reader both formats (and `diloco tokenize`) share.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "inner/data/dataset.h"

namespace diloco::inner {

// Calls `each(path, content)` for every plain-text file `paths` names: a file
// as given, a folder's regular files sorted by name (links and files holding
// NUL bytes, such as fortune's .dat indexes, skipped). Returns how many.
// Throws DataError for a missing or unreadable path, an empty file named
// directly, or when no text file is found.
std::size_t for_each_text_file(const std::vector<std::string>& paths,
                               const std::function<void(const std::string&, const std::string&)>& each);

// Bytes already in memory as a dataset (`name` stands for the file in
// messages), split as data.format = "bytes" splits files: for tests and
// benchmarks.
Dataset bytes_dataset(const std::string& name, const std::string& bytes, double eval_fraction);

class MemoryTokens final : public TokenSource {
 public:
  // `unit` names positions in messages: "byte offset" or "token".
  explicit MemoryTokens(std::string unit) : unit_(std::move(unit)) {}

  // Appends one file's ids.
  void append(const std::string& path, const std::vector<std::uint32_t>& ids);
  void append_bytes(const std::string& path, const std::string& bytes);

  std::uint64_t size() const override { return ids_.size(); }
  void read(std::uint64_t pos, std::size_t n, std::int64_t* out) const override;
  std::string where(std::uint64_t pos) const override;

 private:
  std::string unit_;
  std::vector<std::uint32_t> ids_;
  std::vector<std::uint64_t> starts_;  // first id of each file
  std::vector<std::string> names_;
};

}  // namespace diloco::inner
