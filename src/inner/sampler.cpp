// Sampling: the next-token distribution on the host in double, drawn from a
// seeded std::mt19937_64, so a seed gives the same text on CPU and GPU.
#include "inner/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>

namespace diloco::inner {
namespace {

std::int64_t choose(const torch::Tensor& last_logits, const SampleOptions& o, std::mt19937_64& rng) {
  const auto logits = last_logits.to(torch::kCPU, torch::kDouble).contiguous();
  const double* l = logits.data_ptr<double>();
  auto V = static_cast<std::size_t>(logits.numel());
  if (o.id_limit > 0 && static_cast<std::size_t>(o.id_limit) < V) V = static_cast<std::size_t>(o.id_limit);
  if (o.temperature <= 0.0) return std::max_element(l, l + V) - l;  // the first of equal maxima, as argmax
  std::vector<std::size_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::size_t keep = V;
  if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < V) {
    keep = static_cast<std::size_t>(o.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](std::size_t a, std::size_t b) { return l[a] > l[b]; });
  }
  double top = -INFINITY;
  for (std::size_t i = 0; i < keep; ++i) top = std::max(top, l[order[i]]);
  std::vector<double> p(keep);
  double sum = 0.0;
  for (std::size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((l[order[i]] - top) / o.temperature);
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (std::size_t i = 0; i < keep; ++i) {
    if (u < p[i]) return static_cast<std::int64_t>(order[i]);
    u -= p[i];
  }
  return static_cast<std::int64_t>(order[keep - 1]);
}

torch::Tensor as_batch(const std::vector<std::int64_t>& ids, std::size_t from, const torch::Device& device) {
  std::vector<std::int64_t> window(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
  return torch::tensor(window, torch::kLong).view({1, -1}).to(device);
}

}  // namespace

std::vector<std::int64_t> sample(Model& model, const std::vector<std::int64_t>& prompt, const SampleOptions& o,
                                 const torch::Device& device, const std::function<void(std::int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty: give at least one token");
  for (auto id : prompt)
    if (id < 0 || id >= model.vocab())
      throw std::invalid_argument("prompt id " + std::to_string(id) + " is outside the vocabulary (" +
                                  std::to_string(model.vocab()) + ")");
  torch::NoGradGuard no_grad;
  model.train(false);
  const auto context = static_cast<std::size_t>(model.context_length());
  const bool cached = o.use_cache && model.has_kv_cache();
  std::mt19937_64 rng(o.seed);
  std::vector<std::int64_t> ids = prompt;
  std::vector<std::int64_t> out;
  KvCache cache;
  cache.capacity = static_cast<std::int64_t>(context);
  // The window the model reads starts here; the cache holds ids [start, start + cache.length).
  std::size_t start = ids.size() > context ? ids.size() - context : 0;
  torch::Tensor logits;
  if (cached) logits = model.logits_cached(as_batch(ids, start, device), cache);
  for (int i = 0; i < o.tokens; ++i) {
    if (!cached) logits = model.logits(as_batch(ids, start, device));
    const std::int64_t next = choose(logits.select(0, 0).select(0, logits.size(1) - 1), o, rng);
    ids.push_back(next);
    out.push_back(next);
    if (on_token) on_token(next);
    if (std::find(o.stop.begin(), o.stop.end(), next) != o.stop.end() || i + 1 == o.tokens) break;
    if (ids.size() - start > context) {
      // Full: keep the newest half of the context and read it again.
      start = ids.size() - std::max<std::size_t>(1, context / 2);
      if (cached) {
        cache.clear();
        logits = model.logits_cached(as_batch(ids, start, device), cache);
      }
    } else if (cached) {
      logits = model.logits_cached(torch::tensor({next}, torch::kLong).view({1, 1}).to(device), cache);
    }
  }
  return out;
}

}  // namespace diloco::inner
