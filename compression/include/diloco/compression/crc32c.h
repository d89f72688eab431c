// CRC32C (Castagnoli) checksum of a byte span, used to reject corrupt payloads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace diloco::compression {

// Extends `crc` (0 for a fresh checksum) over `data`.
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t crc = 0);

// The same by table lookups (slicing-by-8): what crc32c uses on CPUs
// without SSE4.2, and the reference its fast path is tested against.
std::uint32_t crc32c_portable(std::span<const std::byte> data, std::uint32_t crc = 0);

}  // namespace diloco::compression
