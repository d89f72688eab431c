// The held-out split: every stride-th chunk of a stream, so held-out data
// follows the same mix of sources as training data. Both parts are views
// computed from positions (nothing copied), so splitting a large
// shard set costs nothing at start-up.
#pragma once

#include <memory>
#include <utility>

#include "inner/data/dataset.h"

namespace diloco::inner {

// Ids per chunk: the unit the split holds out.
inline constexpr std::uint64_t kSplitChunk = 4096;

// (training view, held-out view) of `base`, holding out about `eval_fraction`
// of it. With fewer chunks than the stride, the last chunk is held out.
// A part may come out empty; open_dataset refuses streams that are too short.
std::pair<std::shared_ptr<const TokenSource>, std::shared_ptr<const TokenSource>> split_held_out(
    std::shared_ptr<const TokenSource> base, double eval_fraction);

}  // namespace diloco::inner
