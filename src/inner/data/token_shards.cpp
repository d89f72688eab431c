// Token shards read window by window, and the llm.c shard writer.
//
// Why pread and not mmap: the page cache holds file data in large folios
// (up to 2 MB on current kernels), and a fault on a mapped file maps the
// whole folio into the process. Measured on 2 GB of shards: opening and two
// training steps through a mapping made the process 205 MB larger (and a
// long run would map the whole dataset), while pread copies just the
// window's bytes and leaves the page cache to the kernel.
#include "inner/data/token_shards.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace diloco::inner {
namespace {

namespace fs = std::filesystem;

std::string error_text() { return std::strerror(errno); }

// One open file: ids of `width` bytes from byte `header` on.
struct Shard {
  std::string path;
  int fd = -1;
  std::size_t bytes = 0;
  std::size_t header = 0;
  int width = 2;
  std::uint64_t count = 0;
  bool llmc = false;
};

void close_shard(Shard& s) {
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
}

// Reads bytes [offset, offset + n) of `s` into `out`; throws DataError naming
// the file when they cannot all be read (an I/O error, or the file shrank).
void read_exactly(const Shard& s, std::uint64_t offset, std::size_t n, unsigned char* out) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(s.fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw DataError("cannot read token shard " + s.path + " at byte offset " + std::to_string(offset + done) + ": " +
                      (got < 0 ? error_text() : std::string("the file is shorter than when it was opened")));
    done += static_cast<std::size_t>(got);
  }
}

// One descriptor per shard stays open: lift the soft limit on open files to
// the hard one when a shard set needs more than the default 1024.
void allow_open_files(std::size_t files) {
  struct rlimit limit {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(files) + 256;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
}

Shard open_shard(const std::string& path, TokenDtype dtype) {
  Shard s;
  s.path = path;
  s.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (s.fd < 0) throw DataError("cannot read token shard " + path + ": " + error_text());
  try {
    struct stat st {};
    if (fstat(s.fd, &st) != 0) throw DataError("cannot read token shard " + path + ": " + error_text());
    if (!S_ISREG(st.st_mode)) throw DataError("token shard " + path + " is not a regular file");
    s.bytes = static_cast<std::size_t>(st.st_size);
    if (s.bytes == 0) throw DataError("token shard " + path + " is empty");
    // Windows are drawn at random positions: read-ahead would only waste memory.
    posix_fadvise(s.fd, 0, 0, POSIX_FADV_RANDOM);

    std::int32_t head[3] = {0, 0, 0};
    if (s.bytes >= sizeof head) read_exactly(s, 0, sizeof head, reinterpret_cast<unsigned char*>(head));
    const bool has_magic = head[0] == kShardMagicU16 || head[0] == kShardMagicU32;
    if (dtype == TokenDtype::kAuto) {
      if (!has_magic)
        throw DataError("token shard " + path + " has no llm.c header (magic " + std::to_string(head[0]) +
                        " at byte offset 0, expected " + std::to_string(kShardMagicU16) + " or " +
                        std::to_string(kShardMagicU32) +
                        "); for headerless token files set data.token_dtype = \"uint16\" or \"uint32\"");
      const bool u16 = head[0] == kShardMagicU16;
      const std::int32_t expected = u16 ? kShardVersionU16 : kShardVersionU32;
      if (head[1] != expected)
        throw DataError("token shard " + path + " has version " + std::to_string(head[1]) + " at byte offset 4; magic " +
                        std::to_string(head[0]) + " goes with version " + std::to_string(expected));
      if (s.bytes < kShardHeaderBytes)
        throw DataError("token shard " + path + " is " + std::to_string(s.bytes) + " bytes, shorter than its " +
                        std::to_string(kShardHeaderBytes) + "-byte header");
      s.llmc = true;
      s.width = u16 ? 2 : 4;
      s.header = kShardHeaderBytes;
      if (head[2] <= 0)
        throw DataError("token shard " + path + " holds no tokens (header count " + std::to_string(head[2]) +
                        " at byte offset 8)");
      s.count = static_cast<std::uint64_t>(head[2]);
      if (s.bytes - s.header != s.count * static_cast<std::uint64_t>(s.width))
        throw DataError("token shard " + path + ": its header (byte offset 8) says " + std::to_string(s.count) +
                        " tokens of " + std::to_string(s.width) + " bytes, the file holds " +
                        std::to_string(s.bytes - s.header) + " bytes after the header");
    } else {
      s.width = dtype == TokenDtype::kUint16 ? 2 : 4;
      if (has_magic && s.bytes >= kShardHeaderBytes)
        throw DataError("token shard " + path + " starts with an llm.c header (magic " + std::to_string(head[0]) +
                        "); leave data.token_dtype at \"auto\" to read it");
      if (s.bytes % static_cast<std::size_t>(s.width) != 0)
        throw DataError("token shard " + path + " is " + std::to_string(s.bytes) + " bytes, not a multiple of " +
                        std::to_string(s.width) + " (data.token_dtype = \"" +
                        (s.width == 2 ? "uint16" : "uint32") + "\")");
      s.count = s.bytes / static_cast<std::size_t>(s.width);
    }
  } catch (...) {
    close_shard(s);
    throw;
  }
  return s;
}

class ShardFiles final : public TokenSource {
 public:
  explicit ShardFiles(std::vector<Shard> shards) : shards_(std::move(shards)) {
    for (const auto& s : shards_) {
      starts_.push_back(size_);
      size_ += s.count;
    }
  }
  ~ShardFiles() override {
    for (auto& s : shards_) close_shard(s);
  }
  ShardFiles(const ShardFiles&) = delete;
  ShardFiles& operator=(const ShardFiles&) = delete;

  std::uint64_t size() const override { return size_; }

  void read(std::uint64_t pos, std::size_t n, std::int64_t* out) const override {
    thread_local std::vector<unsigned char> bytes;
    std::size_t file = locate(pos);
    while (n > 0) {
      const Shard& s = shards_[file];
      const std::uint64_t first = pos - starts_[file];
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, s.count - first));
      bytes.resize(take * static_cast<std::size_t>(s.width));
      read_exactly(s, s.header + first * static_cast<std::uint64_t>(s.width), bytes.size(), bytes.data());
      const unsigned char* at = bytes.data();
      if (s.width == 2) {
        for (std::size_t i = 0; i < take; ++i) {
          std::uint16_t v;
          std::memcpy(&v, at + 2 * i, 2);
          out[i] = v;
        }
      } else {
        for (std::size_t i = 0; i < take; ++i) {
          std::uint32_t v;
          std::memcpy(&v, at + 4 * i, 4);
          out[i] = v;
        }
      }
      pos += take;
      out += take;
      n -= take;
      ++file;
    }
  }

  std::string where(std::uint64_t pos) const override {
    const Shard& s = shards_[locate(pos)];
    const std::uint64_t offset = s.header + (pos - starts_[locate(pos)]) * static_cast<std::uint64_t>(s.width);
    return s.path + " at byte offset " + std::to_string(offset);
  }

 private:
  std::size_t locate(std::uint64_t pos) const {
    return static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin() - 1);
  }

  std::vector<Shard> shards_;
  std::vector<std::uint64_t> starts_;
  std::uint64_t size_ = 0;
};

}  // namespace

ShardSet open_token_shards(const std::vector<std::string>& paths, TokenDtype dtype) {
  if (paths.empty()) throw DataError("no data paths given");
  std::vector<std::string> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(p, ec))
        if (entry.is_regular_file() && entry.path().extension() == ".bin") found.push_back(entry.path().string());
      if (ec) throw DataError("cannot list data folder " + p + ": " + ec.message());
      if (found.empty()) throw DataError("data folder " + p + " holds no token shards (*.bin)");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      throw DataError("data path " + p + " does not exist");
    }
  }
  allow_open_files(files.size());
  std::vector<Shard> shards;
  try {
    for (const auto& f : files) shards.push_back(open_shard(f, dtype));
  } catch (...) {
    for (auto& s : shards) close_shard(s);
    throw;
  }
  const bool llmc = shards.front().llmc;
  const int width = shards.front().width;
  bool mixed = false;
  for (const auto& s : shards) mixed = mixed || s.width != width;
  ShardSet set;
  set.files = shards.size();
  set.description = std::to_string(shards.size()) + " token shard" + (shards.size() == 1 ? "" : "s") + " (" +
                    (mixed ? "uint16 and uint32" : width == 2 ? "uint16" : "uint32") + (llmc ? ", llm.c" : "") + ")";
  set.tokens = std::make_shared<ShardFiles>(std::move(shards));
  return set;
}

void write_token_shard(const std::string& path, std::span<const std::uint32_t> ids) {
  if (ids.empty() || ids.size() > 0x7fffffffu) throw DataError("token shard " + path + ": cannot hold " +
                                                               std::to_string(ids.size()) + " tokens");
  const bool u16 = *std::max_element(ids.begin(), ids.end()) < 65536;
  std::int32_t header[256] = {};
  header[0] = u16 ? kShardMagicU16 : kShardMagicU32;
  header[1] = u16 ? kShardVersionU16 : kShardVersionU32;
  header[2] = static_cast<std::int32_t>(ids.size());
  std::vector<unsigned char> body(ids.size() * (u16 ? 2 : 4));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (u16) {
      const auto v = static_cast<std::uint16_t>(ids[i]);
      std::memcpy(&body[2 * i], &v, 2);
    } else {
      std::memcpy(&body[4 * i], &ids[i], 4);
    }
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw DataError("cannot write token shard " + tmp + ": " + error_text());
  const bool ok = std::fwrite(header, sizeof header, 1, f) == 1 && std::fwrite(body.data(), body.size(), 1, f) == 1 &&
                  std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const std::string why = error_text();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw DataError("cannot write token shard " + tmp + ": " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string rename_why = error_text();
    std::remove(tmp.c_str());
    throw DataError("cannot write token shard " + path + ": " + rename_why);
  }
}

}  // namespace diloco::inner
