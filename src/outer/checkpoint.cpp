// Atomic checkpoint files (temporary, fsync, rename, fsync of the folder) and
// the manifest that makes a checkpoint folder valid.
#include "outer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diloco/compression/crc32c.h"

namespace diloco::outer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kManifest = "MANIFEST";
constexpr const char* kManifestHeader = "diloco-checkpoint 1";

std::uint32_t crc_of(const std::string& data) {
  return compression::crc32c(std::as_bytes(std::span<const char>(data.data(), data.size())));
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw CheckpointError("cannot open " + path + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw CheckpointError("cannot sync " + path + ": " + std::strerror(err));
}

// The round in a checkpoint folder's name (list() admits only ckpt-NNNNNNNN).
int round_of_name(const std::string& path) {
  return std::stoi(std::filesystem::path(path).filename().string().substr(5));
}

std::string round_name(int round) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ckpt-%08d", round);
  return buf;
}

}  // namespace

void BlobWriter::u64(std::uint64_t v) { data_.append(reinterpret_cast<const char*>(&v), 8); }
void BlobWriter::f64(double v) { data_.append(reinterpret_cast<const char*>(&v), 8); }
void BlobWriter::floats(std::span<const float> v) {
  u64(v.size());
  data_.append(reinterpret_cast<const char*>(v.data()), v.size_bytes());
}
void BlobWriter::bytes(const std::string& v) {
  u64(v.size());
  data_.append(v);
}

void BlobReader::need(std::size_t n, const char* what) {
  if (data_.size() - pos_ < n)
    throw CheckpointError(source_ + ": truncated while reading " + what);
}
std::uint64_t BlobReader::u64(const char* what) {
  need(8, what);
  std::uint64_t v;
  std::memcpy(&v, data_.data() + pos_, 8);
  pos_ += 8;
  return v;
}
std::uint64_t BlobReader::count(const char* what, std::size_t item_bytes) {
  const auto n = u64(what);
  if (item_bytes > 0 && n > (data_.size() - pos_) / item_bytes)
    throw CheckpointError(source_ + ": " + what + " says " + std::to_string(n) + " but only " +
                          std::to_string(data_.size() - pos_) + " bytes follow (malformed or truncated)");
  return n;
}
double BlobReader::f64(const char* what) {
  need(8, what);
  double v;
  std::memcpy(&v, data_.data() + pos_, 8);
  pos_ += 8;
  return v;
}
std::vector<float> BlobReader::floats(const char* what) {
  const auto n = count(what, sizeof(float));
  std::vector<float> v(n);
  std::memcpy(v.data(), data_.data() + pos_, n * sizeof(float));
  pos_ += n * sizeof(float);
  return v;
}
std::string BlobReader::bytes(const char* what) {
  const auto n = count(what, 1);
  std::string v = data_.substr(pos_, n);
  pos_ += n;
  return v;
}
void BlobReader::expect_end() {
  if (pos_ != data_.size()) throw CheckpointError(source_ + ": " + std::to_string(data_.size() - pos_) + " unexpected trailing bytes");
}

std::string CheckpointStore::staging_dir(int round) const { return dir_ + "/" + round_name(round) + ".tmp"; }
std::string CheckpointStore::final_dir(int round) const { return dir_ + "/" + round_name(round); }

// Through one file descriptor with every call checked: on NFS or Lustre a
// quota or space error often shows only at fsync or close, and an unchecked
// close would publish a short file whose manifest was computed from memory.
CheckpointFile CheckpointStore::write_file(const std::string& dir, const std::string& name, const std::string& data) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".partial";
  const auto failed = [&](const char* call) {
    return CheckpointError("cannot write " + tmp + ": " + call + ": " + std::strerror(errno) +
                           " (disk full, over quota or not writable?)");
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw failed("open");
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const CheckpointError error = failed("write");
      ::close(fd);
      throw error;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const CheckpointError error = failed("fsync");
    ::close(fd);
    throw error;
  }
  if (::close(fd) != 0) throw failed("close");
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw CheckpointError("cannot rename " + tmp + ": " + ec.message());
  fsync_path(dir, true);
  return {name, data.size(), crc_of(data)};
}

std::string CheckpointStore::read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void CheckpointStore::publish(int round, const std::vector<CheckpointFile>& files) const {
  std::ostringstream m;
  m << kManifestHeader << "\nround " << round << "\n";
  for (const auto& f : files) m << "file " << f.name << " " << f.size << " " << f.crc32c << "\n";
  std::string text = m.str();
  text += "crc " + std::to_string(crc_of(text)) + "\n";
  const std::string staging = staging_dir(round);
  write_file(staging, kManifest, text);
  const std::string target = final_dir(round);
  std::error_code ec;
  fs::remove_all(target, ec);  // a same-round checkpoint from an earlier attempt
  fs::rename(staging, target, ec);
  if (ec) throw CheckpointError("cannot publish checkpoint " + target + ": " + ec.message());
  fsync_path(dir_, true);
  // Only what is older than the checkpoint just published goes.
  std::size_t kept = 0;
  for (const auto& path : list()) {
    if (round_of_name(path) > round) continue;
    if (++kept > static_cast<std::size_t>(keep_)) fs::remove_all(path, ec);
  }
}

std::string CheckpointStore::set_aside_newer_than(int round) const {
  std::vector<std::string> newer;
  for (const auto& path : list())
    if (round_of_name(path) > round) newer.push_back(path);
  if (newer.empty()) return {};
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  std::string folder = dir_ + "/abandoned-" + stamp;
  for (int n = 2; fs::exists(folder); ++n) folder = dir_ + "/abandoned-" + stamp + "-" + std::to_string(n);
  std::error_code ec;
  fs::create_directory(folder, ec);
  if (ec) throw CheckpointError("cannot create " + folder + ": " + ec.message());
  for (const auto& path : newer) {
    fs::rename(path, folder + "/" + fs::path(path).filename().string(), ec);
    if (ec) throw CheckpointError("cannot move " + path + " into " + folder + ": " + ec.message());
  }
  fsync_path(folder, true);
  fsync_path(dir_, true);
  return folder;
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return {};
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("ckpt-", 0) != 0 || name.size() != 13) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    found.emplace_back(std::stoi(name.substr(5)), entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

std::vector<CheckpointFile> CheckpointStore::manifest(const std::string& path) {
  const std::string text = read_file(path + "/" + kManifest);
  const auto crc_at = text.rfind("crc ");
  if (crc_at == std::string::npos || text.back() != '\n')
    throw CheckpointError(path + ": manifest is truncated");
  const std::string body = text.substr(0, crc_at);
  if (std::to_string(crc_of(body)) != text.substr(crc_at + 4, text.size() - crc_at - 5))
    throw CheckpointError(path + ": manifest checksum mismatch");
  std::istringstream in(body);
  std::string line;
  std::getline(in, line);
  if (line != kManifestHeader) throw CheckpointError(path + ": not a diloco checkpoint (or another format version)");
  std::vector<CheckpointFile> files;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind != "file") continue;
    CheckpointFile f;
    fields >> f.name >> f.size >> f.crc32c;
    if (!fields || f.name.find('/') != std::string::npos) throw CheckpointError(path + ": malformed manifest line '" + line + "'");
    files.push_back(f);
  }
  return files;
}

int CheckpointStore::round_of(const std::string& path) {
  const std::string text = read_file(path + "/" + kManifest);
  const auto at = text.find("\nround ");
  if (at == std::string::npos) throw CheckpointError(path + ": manifest has no round");
  return std::stoi(text.substr(at + 7));
}

std::string CheckpointStore::verify(const std::string& path) {
  try {
    for (const auto& f : manifest(path)) {
      const std::string data = read_file(path + "/" + f.name);
      if (data.size() != f.size)
        return f.name + " holds " + std::to_string(data.size()) + " bytes, the manifest says " + std::to_string(f.size);
      if (crc_of(data) != f.crc32c) return f.name + " fails its checksum";
    }
    round_of(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return {};
}

std::optional<std::string> CheckpointStore::newest_valid(
    std::vector<std::string>& warnings, const std::function<std::string(const std::string&)>& usable) const {
  for (const auto& path : list()) {
    std::string problem = verify(path);
    if (problem.empty() && usable) problem = usable(path);
    if (problem.empty()) return path;
    warnings.push_back("checkpoint " + path + " is unusable (" + problem + "); trying an older one");
  }
  return std::nullopt;
}

}  // namespace diloco::outer
