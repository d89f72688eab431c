// Codec framing shared by every codec, the codec registry, and the fp32 codec.
#include "diloco/compression/codec.h"

#include <cstring>

#include "diloco/compression/crc32c.h"

namespace diloco::compression {
namespace {

// Raw fp32: the lossless baseline every other codec is measured against.
class NoneCodec final : public Codec {
 public:
  CodecId id() const override { return CodecId::kNone; }
  std::string_view name() const override { return "none"; }
  bool lossless() const override { return true; }

 protected:
  std::size_t body_size(std::size_t count) const override { return count * sizeof(float); }

  void encode_body(std::span<const float> values, std::span<std::byte> body) const override {
    if (!values.empty()) std::memcpy(body.data(), values.data(), values.size_bytes());
  }

  DecodeError decode_body(std::span<const std::byte> body, std::span<float> out, bool accumulate,
                          float weight) const override {
    if (out.empty()) return DecodeError::kOk;
    if (!accumulate) {
      std::memcpy(out.data(), body.data(), out.size_bytes());
      return DecodeError::kOk;
    }
    const std::byte* src = body.data();
    float* dst = out.data();
    const std::size_t n = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, src + i * sizeof(float), sizeof(float));
      dst[i] += weight * v;
    }
    return DecodeError::kOk;
  }
};

}  // namespace

std::vector<std::string> codec_names() { return {"none"}; }

bool codec_id_known(std::uint8_t id) { return id == static_cast<std::uint8_t>(CodecId::kNone); }

std::unique_ptr<Codec> make_codec(std::string_view name) {
  if (name == "none") return std::make_unique<NoneCodec>();
  return nullptr;
}

void Codec::encode(std::span<const float> values, std::vector<std::byte>& payload) const {
  const std::size_t body_bytes = body_size(values.size());
  payload.resize(kWireHeaderSize + body_bytes);
  auto body = std::span<std::byte>(payload).subspan(kWireHeaderSize, body_bytes);
  encode_body(values, body);
  WireHeader header;
  header.codec = static_cast<std::uint8_t>(id());
  header.element_count = values.size();
  header.block_size = block_size();
  header.body_length = body_bytes;
  header.body_crc32c = crc32c(body);
  write_header(header, std::span<std::byte, kWireHeaderSize>(payload.data(), kWireHeaderSize));
}

DecodeError Codec::check(std::span<const std::byte> payload, std::size_t expected_count,
                         std::span<const std::byte>& body) const {
  WireHeader header;
  if (DecodeError e = read_header(payload, header, body); e != DecodeError::kOk) return e;
  if (header.codec != static_cast<std::uint8_t>(id())) {
    return codec_id_known(header.codec) ? DecodeError::kCodecMismatch : DecodeError::kUnknownCodec;
  }
  if (header.element_count != expected_count) return DecodeError::kCountMismatch;
  if (header.block_size != block_size()) return DecodeError::kLengthMismatch;
  if (header.body_length != body_size(expected_count)) return DecodeError::kLengthMismatch;
  return DecodeError::kOk;
}

DecodeError Codec::decode(std::span<const std::byte> payload, std::span<float> out) const {
  std::span<const std::byte> body;
  if (DecodeError e = check(payload, out.size(), body); e != DecodeError::kOk) return e;
  return decode_body(body, out, false, 1.0f);
}

DecodeError Codec::decode_accumulate(std::span<const std::byte> payload, std::span<float> acc,
                                     float weight) const {
  std::span<const std::byte> body;
  if (DecodeError e = check(payload, acc.size(), body); e != DecodeError::kOk) return e;
  return decode_body(body, acc, true, weight);
}

}  // namespace diloco::compression
