// The header every encoded payload carries, and the checks a decoder runs on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace diloco::compression {

// Why a payload was refused. Codecs return this instead of throwing so the
// fuzzer and the training hot path run the very same code.
enum class DecodeError : std::uint8_t {
  kOk = 0,
  kTruncated,           // shorter than its header or than the length it declares
  kBadMagic,            // not a diloco payload
  kUnsupportedVersion,  // written by a newer or older wire format
  kUnknownCodec,        // codec id this build does not know
  kCodecMismatch,       // a valid payload, but of another codec than expected
  kLengthMismatch,      // declared body length disagrees with the bytes or the count
  kCountMismatch,       // element count differs from what the receiver expects
  kChecksumMismatch,    // CRC32C of the body does not match
  kNonFiniteScale,      // a block scale is NaN, infinite or negative
  kCorruptBody,         // body structure invalid (index out of range or unordered, value out of range)
  kNonFiniteValue,      // a value decodes to NaN or infinity (no encoder writes one: the sender is faulty or hostile)
};

std::string_view to_string(DecodeError error);

inline constexpr std::uint32_t kWireMagic = 0x4F434C44u;  // "DLCO" little-endian
inline constexpr std::uint16_t kWireVersion = 1;
inline constexpr std::size_t kWireHeaderSize = 32;

struct WireHeader {
  std::uint8_t codec = 0;
  std::uint8_t flags = 0;
  std::uint64_t element_count = 0;
  std::uint32_t block_size = 0;
  std::uint64_t body_length = 0;
  std::uint32_t body_crc32c = 0;
};

// Writes the header into the first kWireHeaderSize bytes of `out`.
void write_header(const WireHeader& header, std::span<std::byte, kWireHeaderSize> out);

// Parses and checks magic, version, declared length and (unless
// `verify_checksum` is false: the caller checks it in a pass of its own) the
// checksum. On success `header` is filled and `body` views the body inside
// `payload`.
DecodeError read_header(std::span<const std::byte> payload, WireHeader& header,
                        std::span<const std::byte>& body, bool verify_checksum = true);

}  // namespace diloco::compression
