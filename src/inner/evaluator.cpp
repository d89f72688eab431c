// Loss over a token stream in consecutive windows, batched.
#include "inner/evaluator.h"

#include <algorithm>
#include <vector>

namespace diloco::inner {

EvalTotals evaluate(Model& model, const TokenSource& source, const EvalWindows& w, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model.train(false);
  const std::uint64_t n = w.max_tokens > 0 ? std::min<std::uint64_t>(source.size(), w.max_tokens) : source.size();
  const std::uint64_t T = static_cast<std::uint64_t>(w.seq_len);
  const std::uint64_t windows = n < 2 ? 0 : (n - 1 + T - 1) / T;
  EvalTotals totals;
  std::vector<std::uint64_t> mine;
  for (std::uint64_t k = static_cast<std::uint64_t>(w.replica); k < windows; k += static_cast<std::uint64_t>(w.replicas))
    mine.push_back(k);
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < mine.size();) {
    // Full windows share a batch; the stream's last, shorter one goes alone.
    const std::uint64_t len = std::min(T, n - 1 - mine[i] * T);
    std::size_t j = i;
    ids.clear();
    while (j < mine.size() && j - i < static_cast<std::size_t>(w.batch) && std::min(T, n - 1 - mine[j] * T) == len) {
      const std::size_t at = ids.size();
      ids.resize(at + len + 1);
      source.read(mine[j] * T, len + 1, ids.data() + at);
      check_ids(source, mine[j] * T, ids.data() + at, len + 1, model.vocab());
      ++j;
    }
    const auto rows = static_cast<std::int64_t>(j - i);
    const auto batch = torch::from_blob(ids.data(), {rows, static_cast<std::int64_t>(len + 1)}, torch::kLong).to(device);
    const auto logits = model.logits(batch.slice(1, 0, -1));
    const auto loss = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}).to(torch::kDouble), batch.slice(1, 1).reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    totals.nats += loss.item<double>();
    totals.tokens += rows * static_cast<std::int64_t>(len);
    i = j;
  }
  return totals;
}

}  // namespace diloco::inner
