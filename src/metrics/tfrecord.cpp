// TFRecord framing with masked CRC32C (the CRC itself is the codecs' one).
#include "metrics/tfrecord.h"

#include <cstddef>
#include <cstring>
#include <span>

#include "diloco/compression/crc32c.h"

namespace diloco::metrics {
namespace {

constexpr std::uint32_t kMaskDelta = 0xa282ead8u;

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

std::uint64_t get_le(std::string_view in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

}  // namespace

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = compression::crc32c(std::as_bytes(std::span<const char>(data.data(), data.size())));
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

void append_record(std::string& out, std::string_view data) {
  std::string length;
  put_le(length, data.size(), 8);
  out += length;
  put_le(out, masked_crc32c(length), 4);
  out.append(data);
  put_le(out, masked_crc32c(data), 4);
}

std::string read_record(std::string_view file, std::size_t& offset, std::string& data) {
  if (file.size() - offset < 12) return "a record header is cut short at byte " + std::to_string(offset);
  const std::string_view length = file.substr(offset, 8);
  if (get_le(file, offset + 8, 4) != masked_crc32c(length))
    return "the length CRC does not match at byte " + std::to_string(offset);
  const std::uint64_t size = get_le(length, 0, 8);
  if (file.size() - offset - 12 < size + 4) return "a record is cut short at byte " + std::to_string(offset);
  const std::string_view body = file.substr(offset + 12, size);
  if (get_le(file, offset + 12 + size, 4) != masked_crc32c(body))
    return "the data CRC does not match in the record at byte " + std::to_string(offset);
  data.assign(body);
  offset += 12 + size + 4;
  return {};
}

}  // namespace diloco::metrics
