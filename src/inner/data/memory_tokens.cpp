// In-memory token streams and the plain-text file walk.
#include "inner/data/memory_tokens.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "inner/data/held_out_split.h"

namespace diloco::inner {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot read data file " + path.string() + ": " + std::strerror(errno));
  std::string content((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) throw DataError("cannot read data file " + path.string() + ": read failed");
  return content;
}

}  // namespace

std::size_t for_each_text_file(const std::vector<std::string>& paths,
                               const std::function<void(const std::string&, const std::string&)>& each) {
  if (paths.empty()) throw DataError("no data paths given");
  std::size_t files = 0;
  for (const std::string& p : paths) {
    std::error_code ec;
    const fs::path path(p);
    if (fs::is_directory(path, ec)) {
      std::vector<fs::path> entries;
      for (const auto& entry : fs::directory_iterator(path, ec))
        if (entry.is_regular_file() && !entry.is_symlink()) entries.push_back(entry.path());
      if (ec) throw DataError("cannot list data folder " + p + ": " + ec.message());
      std::sort(entries.begin(), entries.end());
      for (const auto& file : entries) {
        const std::string content = read_file(file);
        if (content.empty() || content.find('\0') != std::string::npos) continue;
        each(file.string(), content);
        ++files;
      }
    } else if (fs::is_regular_file(path, ec)) {
      const std::string content = read_file(path);
      if (content.empty()) throw DataError("data file " + p + " is empty");
      each(p, content);
      ++files;
    } else {
      throw DataError("data path " + p + " does not exist");
    }
  }
  if (files == 0) {
    std::string list;
    for (const auto& p : paths) list += (list.empty() ? "" : ", ") + p;
    throw DataError("no plain-text files under " + list);
  }
  return files;
}

Dataset bytes_dataset(const std::string& name, const std::string& bytes, double eval_fraction) {
  auto tokens = std::make_shared<MemoryTokens>("byte offset");
  tokens->append_bytes(name, bytes);
  auto [train, eval] = split_held_out(std::move(tokens), eval_fraction);
  return Dataset(std::move(train), std::move(eval), 1, name);
}

void MemoryTokens::append(const std::string& path, const std::vector<std::uint32_t>& ids) {
  starts_.push_back(ids_.size());
  names_.push_back(path);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
}

void MemoryTokens::append_bytes(const std::string& path, const std::string& bytes) {
  starts_.push_back(ids_.size());
  names_.push_back(path);
  for (const char c : bytes) ids_.push_back(static_cast<unsigned char>(c));
}

void MemoryTokens::read(std::uint64_t pos, std::size_t n, std::int64_t* out) const {
  std::copy(ids_.begin() + static_cast<std::ptrdiff_t>(pos), ids_.begin() + static_cast<std::ptrdiff_t>(pos + n), out);
}

std::string MemoryTokens::where(std::uint64_t pos) const {
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), pos);
  if (it == starts_.begin()) return "position " + std::to_string(pos);
  const auto file = static_cast<std::size_t>(it - starts_.begin() - 1);
  return names_[file] + " at " + unit_ + " " + std::to_string(pos - starts_[file]);
}

}  // namespace diloco::inner
