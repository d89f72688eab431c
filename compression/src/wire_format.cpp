// Serialization of the payload header: fixed 32 bytes, little-endian.
#include "diloco/compression/wire_format.h"

#include <bit>
#include <cstring>

#include "diloco/compression/crc32c.h"

namespace diloco::compression {

static_assert(std::endian::native == std::endian::little,
              "the wire format and CRC code assume a little-endian host");

namespace {

template <class T>
void put(std::byte* dst, std::size_t offset, T value) {
  std::memcpy(dst + offset, &value, sizeof(T));
}

template <class T>
T get(const std::byte* src, std::size_t offset) {
  T value;
  std::memcpy(&value, src + offset, sizeof(T));
  return value;
}

// Field offsets: magic 0, version 4, codec 6, flags 7, count 8, block 16,
// body length 20, crc 28.
}  // namespace

std::string_view to_string(DecodeError error) {
  switch (error) {
    case DecodeError::kOk: return "ok";
    case DecodeError::kTruncated: return "truncated payload";
    case DecodeError::kBadMagic: return "bad magic";
    case DecodeError::kUnsupportedVersion: return "unsupported wire format version";
    case DecodeError::kUnknownCodec: return "unknown codec";
    case DecodeError::kCodecMismatch: return "payload codec differs from the expected one";
    case DecodeError::kLengthMismatch: return "length mismatch";
    case DecodeError::kCountMismatch: return "element count mismatch";
    case DecodeError::kChecksumMismatch: return "checksum mismatch";
    case DecodeError::kNonFiniteScale: return "non-finite scale";
    case DecodeError::kCorruptBody: return "corrupt body";
    case DecodeError::kNonFiniteValue: return "non-finite value";
  }
  return "unknown decode error";
}

void write_header(const WireHeader& h, std::span<std::byte, kWireHeaderSize> out) {
  std::byte* p = out.data();
  put<std::uint32_t>(p, 0, kWireMagic);
  put<std::uint16_t>(p, 4, kWireVersion);
  put<std::uint8_t>(p, 6, h.codec);
  put<std::uint8_t>(p, 7, h.flags);
  put<std::uint64_t>(p, 8, h.element_count);
  put<std::uint32_t>(p, 16, h.block_size);
  put<std::uint64_t>(p, 20, h.body_length);
  put<std::uint32_t>(p, 28, h.body_crc32c);
}

DecodeError read_header(std::span<const std::byte> payload, WireHeader& h,
                        std::span<const std::byte>& body, bool verify_checksum) {
  if (payload.size() < kWireHeaderSize) return DecodeError::kTruncated;
  const std::byte* p = payload.data();
  if (get<std::uint32_t>(p, 0) != kWireMagic) return DecodeError::kBadMagic;
  if (get<std::uint16_t>(p, 4) != kWireVersion) return DecodeError::kUnsupportedVersion;
  h.codec = get<std::uint8_t>(p, 6);
  h.flags = get<std::uint8_t>(p, 7);
  h.element_count = get<std::uint64_t>(p, 8);
  h.block_size = get<std::uint32_t>(p, 16);
  h.body_length = get<std::uint64_t>(p, 20);
  h.body_crc32c = get<std::uint32_t>(p, 28);
  const std::size_t available = payload.size() - kWireHeaderSize;
  if (h.body_length > available) return DecodeError::kTruncated;
  if (h.body_length < available) return DecodeError::kLengthMismatch;
  body = payload.subspan(kWireHeaderSize, h.body_length);
  if (verify_checksum && crc32c(body) != h.body_crc32c) return DecodeError::kChecksumMismatch;
  return DecodeError::kOk;
}

}  // namespace diloco::compression
