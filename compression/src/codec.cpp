// Codec framing shared by every codec (header, checksum, checks) and the
// registry that maps recipe names to codecs.
#include "diloco/compression/codec.h"

#include <algorithm>
#include <cstring>

#include "codec_util.h"
#include "diloco/compression/crc32c.h"

namespace diloco::compression {

std::vector<std::string> codec_names() {
  return {"none", "fp16", "bf16", "int8", "int4", "topk", "topk+int8", "sign", "chunk-topk"};
}

bool codec_id_known(std::uint8_t id) { return id <= static_cast<std::uint8_t>(CodecId::kChunkTopk); }

DILOCO_CLONES bool all_finite(std::span<const float> values) {
  // Branch-free reduction so it vectorizes.
  std::uint32_t bad = 0;
  for (float v : values) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    bad |= static_cast<std::uint32_t>((u & 0x7F800000u) == 0x7F800000u);
  }
  return bad == 0;
}

DILOCO_CLONES double sum_of_squares(std::span<const float> values) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::size_t n = values.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) lanes[j] += static_cast<double>(values[i + j]) * values[i + j];
  double sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) sum += static_cast<double>(values[i]) * values[i];
  return sum;
}

std::unique_ptr<Codec> make_codec(const CodecConfig& c, std::string* error) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<Codec> {
    if (error) *error = why;
    return nullptr;
  };
  if (c.block < 1 || c.block > (1u << 24)) return fail("block size must be in [1, 16777216]");
  if (!(c.topk_ratio > 0.0 && c.topk_ratio <= 1.0)) return fail("topk ratio must be in (0, 1]");
  if (c.name == "none") return detail::make_none_codec();
  if (c.name == "fp16") return detail::make_fp16_codec();
  if (c.name == "bf16") return detail::make_bf16_codec();
  if (c.name == "int8") return detail::make_int8_codec(c);
  if (c.name == "int4") return detail::make_int4_codec(c);
  if (c.name == "topk") return detail::make_topk_codec(c, false);
  if (c.name == "topk+int8") return detail::make_topk_codec(c, true);
  if (c.name == "sign") return detail::make_sign_codec(c);
  if (c.name == "chunk-topk") {
    if (c.block > (1u << 16)) return fail("chunk-topk: block (the chunk) must be in [1, 65536]");
    if (c.value_bits != 2 && c.value_bits != 4 && c.value_bits != 8) return fail("chunk-topk: bits must be 2, 4 or 8");
    return detail::make_chunk_topk_codec(c);
  }
  return fail("unknown codec '" + c.name + "'");
}

EncodeError Codec::encode(std::span<const float> values, std::vector<std::byte>& payload, std::uint64_t seed) const {
  if (!checks_finite() && !all_finite(values)) {
    payload.clear();
    return EncodeError::kNonFiniteInput;
  }
  payload.resize(kWireHeaderSize + body_size(values.size()));
  auto room = std::span<std::byte>(payload).subspan(kWireHeaderSize);
  std::uint32_t body_crc = 0;
  const std::size_t used = encode_body_crc(values, room, seed, body_crc);
  if (used == kNonFinite) {
    payload.clear();
    return EncodeError::kNonFiniteInput;
  }
  payload.resize(kWireHeaderSize + used);
  WireHeader header;
  header.codec = static_cast<std::uint8_t>(id());
  header.element_count = values.size();
  header.block_size = block_size();
  header.body_length = used;
  header.body_crc32c = body_crc;
  write_header(header, std::span<std::byte, kWireHeaderSize>(payload.data(), kWireHeaderSize));
  return EncodeError::kOk;
}

std::size_t Codec::encode_body_crc(std::span<const float> values, std::span<std::byte> body, std::uint64_t seed,
                                  std::uint32_t& crc) const {
  const std::size_t used = encode_body(values, body, seed);
  if (used != kNonFinite) crc = crc32c(body.first(used));
  return used;
}

DecodeError Codec::check(std::span<const std::byte> payload, std::size_t expected_count,
                         std::span<const std::byte>& body) const {
  WireHeader header;
  if (DecodeError e = read_header(payload, header, body, /*verify_checksum=*/false); e != DecodeError::kOk) return e;
  if (header.codec != static_cast<std::uint8_t>(id()))
    return codec_id_known(header.codec) ? DecodeError::kCodecMismatch : DecodeError::kUnknownCodec;
  if (header.element_count != expected_count) return DecodeError::kCountMismatch;
  if (header.block_size != block_size()) return DecodeError::kLengthMismatch;
  if (fixed_body_size() && header.body_length != body_size(expected_count)) return DecodeError::kLengthMismatch;
  // One pass over the body in pieces that stay in cache: the checksum and
  // the codec's check of its words. A checksum mismatch is reported first:
  // the words of a damaged body say nothing.
  constexpr std::size_t kPiece = std::size_t{1} << 16;
  std::uint32_t crc = 0;
  bool valid = true;
  for (std::size_t at = 0; at < body.size(); at += kPiece) {
    const auto piece = body.subspan(at, std::min(kPiece, body.size() - at));
    crc = crc32c(piece, crc);
    valid = piece_valid(piece) && valid;
  }
  if (crc != header.body_crc32c) return DecodeError::kChecksumMismatch;
  return valid ? DecodeError::kOk : DecodeError::kNonFiniteValue;
}

DecodeError Codec::decode(std::span<const std::byte> payload, std::span<float> out) const {
  std::span<const std::byte> body;
  if (DecodeError e = check(payload, out.size(), body); e != DecodeError::kOk) return e;
  return decode_body(body, out, false, 1.0f);
}

DecodeError Codec::decode_accumulate(std::span<const std::byte> payload, std::span<float> acc, float weight) const {
  std::span<const std::byte> body;
  if (DecodeError e = check(payload, acc.size(), body); e != DecodeError::kOk) return e;
  return decode_body(body, acc, true, weight);
}

}  // namespace diloco::compression
