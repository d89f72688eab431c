// TFRecord framing, the container of TensorBoard's event files: each record
// is its length (u64 little-endian), the length's masked CRC32C, the data
// and the data's masked CRC32C.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace diloco::metrics {

// CRC32C rotated right by 15 bits plus a constant, as TFRecord stores it (a
// CRC of data that holds CRCs is then not trivially related to them).
std::uint32_t masked_crc32c(std::string_view data);

// Appends one framed record holding `data` to `out`.
void append_record(std::string& out, std::string_view data);

// Reads the record at `offset` of `file` into `data` and moves `offset`
// past it. Returns "" on success, else why the record is not whole or its
// CRCs do not match (what a reader of a file still being written can meet
// at its end).
std::string read_record(std::string_view file, std::size_t& offset, std::string& data);

}  // namespace diloco::metrics
