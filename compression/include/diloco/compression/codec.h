// Pseudo-gradient codecs: spans of floats in, checked payload bytes out, and back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "diloco/compression/wire_format.h"

namespace diloco::compression {

enum class CodecId : std::uint8_t {
  kNone = 0,  // raw fp32, lossless
};

// Names accepted by `compression.codec`, in the order they are documented.
std::vector<std::string> codec_names();

// True when `id` names a codec this build can decode.
bool codec_id_known(std::uint8_t id);

// One codec. encode() writes the full payload (header + body); decode()
// checks the header and body before writing a single output element, so a
// refused payload leaves `out` untouched.
class Codec {
 public:
  virtual ~Codec() = default;

  virtual CodecId id() const = 0;
  virtual std::string_view name() const = 0;
  virtual bool lossless() const = 0;

  // Encodes `values` into `payload` (resized to fit).
  void encode(std::span<const float> values, std::vector<std::byte>& payload) const;

  // out[i] = decoded[i]. out.size() must equal the payload's element count.
  DecodeError decode(std::span<const std::byte> payload, std::span<float> out) const;

  // acc[i] += weight * decoded[i]: lets an exchange average payloads without
  // a temporary buffer per peer.
  DecodeError decode_accumulate(std::span<const std::byte> payload, std::span<float> acc,
                                float weight) const;

 protected:
  virtual std::size_t body_size(std::size_t count) const = 0;
  virtual std::uint32_t block_size() const { return 0; }
  virtual void encode_body(std::span<const float> values, std::span<std::byte> body) const = 0;
  // `body` has passed the header checks and has exactly body_size(out.size()) bytes.
  virtual DecodeError decode_body(std::span<const std::byte> body, std::span<float> out,
                                  bool accumulate, float weight) const = 0;

 private:
  DecodeError check(std::span<const std::byte> payload, std::size_t expected_count,
                    std::span<const std::byte>& body) const;
};

// Returns nullptr for an unknown name.
std::unique_ptr<Codec> make_codec(std::string_view name);

}  // namespace diloco::compression
