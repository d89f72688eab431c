// safetensors: a memory-mapped reader that checks every header field against
// the file before use, and an atomic F32 writer. JSON through nlohmann-json.
#include "inner/models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "diloco/compression/half.h"

namespace diloco::inner {
namespace {

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const auto fail = [&](const std::string& why) { return WeightsError(path + ": " + why); };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw fail("not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    throw fail("not a safetensors file (" + std::to_string(size_) + " bytes, shorter than its header length)");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw fail(std::string("cannot map: ") + std::strerror(errno));
  }
  const auto* bytes = static_cast<const std::byte*>(map_);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian, as on every machine diloco runs on
  if (header_len > size_ - 8) {
    unmap();
    throw fail("header length " + std::to_string(header_len) + " exceeds the file (" + std::to_string(size_) +
               " bytes): not a safetensors file");
  }
  const std::size_t data_start = 8 + header_len;
  const std::size_t data_size = size_ - data_start;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes + 8),
                                   reinterpret_cast<const char*>(bytes + data_start));
  } catch (const nlohmann::json::exception& e) {
    unmap();
    throw fail(std::string("header is not JSON: ") + e.what());
  }
  try {
    if (!header.is_object()) throw fail("header is not a JSON object");
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (!entry.is_object()) throw fail("__metadata__ is not an object");
        for (const auto& [k, v] : entry.items())
          if (v.is_string()) metadata_[k] = v.get<std::string>();
        continue;
      }
      const auto where = "tensor '" + name + "': ";
      if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
        throw fail(where + "needs dtype, shape and data_offsets");
      Tensor t;
      t.dtype = entry.at("dtype").get<std::string>();
      const std::size_t width = dtype_bytes(t.dtype);
      if (width == 0) throw fail(where + "unknown dtype " + t.dtype);
      std::uint64_t count = 1;
      for (const auto& d : entry.at("shape")) {
        const auto v = d.get<std::int64_t>();
        if (v < 0 || (v > 0 && count > (std::uint64_t{1} << 48) / static_cast<std::uint64_t>(v)))
          throw fail(where + "bad shape");
        t.shape.push_back(v);
        count *= static_cast<std::uint64_t>(v);
      }
      const auto& offsets = entry.at("data_offsets");
      if (!offsets.is_array() || offsets.size() != 2) throw fail(where + "data_offsets must be [begin, end]");
      const auto begin = offsets[0].get<std::uint64_t>();
      const auto end = offsets[1].get<std::uint64_t>();
      if (begin > end || end > data_size)
        throw fail(where + "byte range [" + std::to_string(begin) + ", " + std::to_string(end) +
                   ") lies outside the data (" + std::to_string(data_size) + " bytes)");
      if (end - begin != count * width)
        throw fail(where + std::to_string(end - begin) + " bytes for " + std::to_string(count) + " values of " + t.dtype);
      t.data = std::span<const std::byte>(bytes + data_start + begin, end - begin);
      ranges.emplace_back(begin, end);
      tensors_.emplace(name, std::move(t));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second) throw fail("two tensors share bytes");
  } catch (const nlohmann::json::exception& e) {
    unmap();
    throw fail(std::string("malformed header: ") + e.what());
  } catch (...) {
    unmap();
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (map_) ::munmap(map_, size_);
  map_ = nullptr;
}

std::vector<float> SafetensorsFile::to_floats(const std::string& name) const {
  const Tensor& t = tensors_.at(name);
  std::vector<float> out;
  if (t.dtype == "F32") {
    out.resize(t.data.size() / 4);
    std::memcpy(out.data(), t.data.data(), t.data.size());
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    // The data may sit at any offset: copy the 16-bit words out first.
    std::vector<std::uint16_t> halves(t.data.size() / 2);
    std::memcpy(halves.data(), t.data.data(), t.data.size());
    out.resize(halves.size());
    if (t.dtype == "F16") {
      compression::halves_to_floats(halves.data(), out.data(), halves.size());
    } else {
      for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(halves[i]) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
    }
  } else {
    throw WeightsError(path_ + ": tensor '" + name + "' is " + t.dtype + "; weights must be F32, F16 or BF16");
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::uint64_t bytes = t.values.size_bytes();
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned, as the format recommends
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const std::uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& t : tensors)
      out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size_bytes()));
    out.flush();
    out.close();
    if (!out) throw WeightsError("cannot write " + tmp + " (disk full or not writable?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw WeightsError("cannot rename " + tmp + " to " + path + ": " + ec.message());
}

}  // namespace diloco::inner
