// All-gather exchange: message = [weight as f64][codec payload].
#include "outer/exchange.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

namespace diloco::outer {

Exchange::Exchange(comm::Communicator& leaders, std::unique_ptr<compression::Codec> codec)
    : leaders_(leaders), codec_(std::move(codec)) {}

ExchangeStats Exchange::average(std::span<float> delta, double weight) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::byte> payload;
  codec_->encode(delta, payload);
  message_.resize(sizeof(double) + payload.size());
  std::memcpy(message_.data(), &weight, sizeof(double));
  std::memcpy(message_.data() + sizeof(double), payload.data(), payload.size());

  auto messages = leaders_.all_gather(message_);

  std::vector<double> weights(messages.size());
  double total = 0.0;
  for (std::size_t site = 0; site < messages.size(); ++site) {
    if (messages[site].size() < sizeof(double))
      throw ExchangeError("site " + std::to_string(site) + " sent a message of " +
                              std::to_string(messages[site].size()) + " bytes, too short for its weight",
                          static_cast<int>(site));
    std::memcpy(&weights[site], messages[site].data(), sizeof(double));
    if (!(weights[site] > 0.0) || !std::isfinite(weights[site]))
      throw ExchangeError("site " + std::to_string(site) + " sent weight " + std::to_string(weights[site]),
                          static_cast<int>(site));
    total += weights[site];
  }
  std::fill(delta.begin(), delta.end(), 0.0f);
  for (std::size_t site = 0; site < messages.size(); ++site) {
    const auto body = std::span<const std::byte>(messages[site]).subspan(sizeof(double));
    const auto err = codec_->decode_accumulate(body, delta, static_cast<float>(weights[site] / total));
    if (err != compression::DecodeError::kOk)
      throw ExchangeError("pseudo-gradient from site " + std::to_string(site) +
                              " rejected: " + std::string(compression::to_string(err)),
                          static_cast<int>(site));
  }
  ExchangeStats stats;
  stats.payload_bytes = payload.size();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace diloco::outer
