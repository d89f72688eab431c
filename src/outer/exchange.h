// Exchange of pseudo-gradients between site leaders: each encodes its own,
// all leaders gather every payload, and each decodes and sums them in rank
// order, so every site computes the bit-identical weighted average.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "comm/communicator.h"
#include "diloco/compression/codec.h"

namespace diloco::outer {

// A peer's payload failed its checks; it was not applied.
class ExchangeError : public std::runtime_error {
 public:
  ExchangeError(const std::string& what, int site) : std::runtime_error(what), site_(site) {}
  int site() const { return site_; }

 private:
  int site_;
};

struct ExchangeStats {
  std::uint64_t payload_bytes = 0;  // this site's encoded payload
  double seconds = 0.0;
};

class Exchange {
 public:
  Exchange(comm::Communicator& leaders, std::unique_ptr<compression::Codec> codec);

  // Replaces `delta` with sum_i w_i * delta_i / sum_i w_i over all sites,
  // where w_i is each site's `weight` (tokens processed this round).
  ExchangeStats average(std::span<float> delta, double weight);

  const compression::Codec& codec() const { return *codec_; }

 private:
  comm::Communicator& leaders_;
  std::unique_ptr<compression::Codec> codec_;
  std::vector<std::byte> message_;
};

}  // namespace diloco::outer
