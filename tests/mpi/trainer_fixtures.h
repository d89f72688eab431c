// Shared by the multi-rank trainer tests: the tiny model they train, the
// shard of a rank, and a hash to compare parameters across ranks.
#pragma once

#include <cstdint>
#include <span>

#include "comm/topology.h"
#include "inner/data/dataset.h"
#include "inner/model_config.h"

namespace diloco::testing {

inline inner::ModelConfig tiny_model() {
  inner::ModelConfig m;
  m.d_model = 16;
  m.n_layers = 1;
  m.n_heads = 2;
  m.seq_len = 16;
  return m;
}

inline inner::ShardSpec shard_of(const comm::Topology& t) { return {t.site, t.num_sites, t.site_rank, t.site_size}; }

inline std::uint64_t fnv1a(std::span<const float> values) {
  std::uint64_t h = 1469598103934665603ull;
  for (auto b : std::as_bytes(values)) h = (h ^ static_cast<std::uint8_t>(b)) * 1099511628211ull;
  return h;
}

}  // namespace diloco::testing
