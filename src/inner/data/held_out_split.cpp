// Chunk arithmetic of the held-out split.
#include "inner/data/held_out_split.h"

#include <algorithm>

namespace diloco::inner {
namespace {

// The chunks of one part, in order: part chunk j is base chunk global(j).
class SplitView final : public TokenSource {
 public:
  SplitView(std::shared_ptr<const TokenSource> base, std::uint64_t stride, bool held_out)
      : base_(std::move(base)), stride_(stride), held_out_(held_out) {
    const std::uint64_t n = base_->size();
    chunks_ = (n + kSplitChunk - 1) / kSplitChunk;
    few_ = chunks_ < stride_;
    // Held-out chunks: the last one when there are few, else every stride-th.
    const std::uint64_t held = few_ ? (chunks_ > 1 ? 1 : 0) : chunks_ / stride_;
    const bool last_held = few_ ? chunks_ > 1 : chunks_ % stride_ == 0;
    const std::uint64_t last_len = n - (chunks_ == 0 ? 0 : (chunks_ - 1) * kSplitChunk);
    const std::uint64_t held_size = held == 0 ? 0 : (held - 1) * kSplitChunk + (last_held ? last_len : kSplitChunk);
    size_ = held_out_ ? held_size : n - held_size;
  }

  std::uint64_t size() const override { return size_; }

  void read(std::uint64_t pos, std::size_t n, std::int64_t* out) const override {
    while (n > 0) {
      const std::uint64_t offset = pos % kSplitChunk;
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, kSplitChunk - offset));
      base_->read(global(pos / kSplitChunk) * kSplitChunk + offset, take, out);
      pos += take;
      out += take;
      n -= take;
    }
  }

  std::string where(std::uint64_t pos) const override {
    return base_->where(global(pos / kSplitChunk) * kSplitChunk + pos % kSplitChunk);
  }

 private:
  std::uint64_t global(std::uint64_t j) const {
    if (few_) return held_out_ ? chunks_ - 1 : j;
    return held_out_ ? j * stride_ + stride_ - 1 : j + j / (stride_ - 1);
  }

  std::shared_ptr<const TokenSource> base_;
  std::uint64_t stride_;
  bool held_out_;
  std::uint64_t chunks_ = 0;
  bool few_ = false;
  std::uint64_t size_ = 0;
};

}  // namespace

std::pair<std::shared_ptr<const TokenSource>, std::shared_ptr<const TokenSource>> split_held_out(
    std::shared_ptr<const TokenSource> base, double eval_fraction) {
  if (!(eval_fraction > 0.0 && eval_fraction < 1.0)) throw DataError("eval fraction must be in (0, 1)");
  const auto stride = std::max<std::uint64_t>(2, static_cast<std::uint64_t>(1.0 / eval_fraction + 0.5));
  auto train = std::make_shared<SplitView>(base, stride, false);
  auto eval = std::make_shared<SplitView>(base, stride, true);
  return {std::move(train), std::move(eval)};
}

}  // namespace diloco::inner
