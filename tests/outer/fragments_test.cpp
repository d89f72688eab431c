// Fragment split: whole layers, contiguous, balanced, and the staggered starts.
#include <gtest/gtest.h>

#include "outer/fragments.h"

using namespace diloco::outer;

namespace {

std::vector<LayerSpan> layers(const std::vector<std::size_t>& counts) {
  std::vector<LayerSpan> out;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    out.push_back({"layer" + std::to_string(i), offset, counts[i]});
    offset += counts[i];
  }
  return out;
}

}  // namespace

TEST(FragmentsTest, OneFragmentIsEverything) {
  const auto f = split_fragments(layers({5, 7, 9}), 1);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].offset, 0u);
  EXPECT_EQ(f[0].count, 21u);
}

TEST(FragmentsTest, SplitsAtTheLayerBoundaryNearestEqualShares) {
  // Embedding 100, four blocks of 50, final norm 2: total 302, halves at 151.
  const auto f = split_fragments(layers({100, 50, 50, 50, 50, 2}), 2);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].count, 150u);  // embedding + 1 block: 150 is nearest 151
  EXPECT_EQ(f[1].offset, 150u);
  EXPECT_EQ(f[1].count, 152u);
  EXPECT_EQ(f[0].last_layer, "layer1");
  const auto thirds = split_fragments(layers({100, 50, 50, 50, 50, 2}), 3);  // targets 100.7, 201.3
  EXPECT_EQ(thirds[0].count, 100u);
  EXPECT_EQ(thirds[1].count, 100u);
  EXPECT_EQ(thirds[2].count, 102u);
}

TEST(FragmentsTest, EveryFragmentGetsALayerAndTheyTileTheParameters) {
  const auto f = split_fragments(layers({1000, 1, 1, 1}), 4);
  ASSERT_EQ(f.size(), 4u);
  std::size_t next = 0;
  for (const auto& frag : f) {
    EXPECT_EQ(frag.offset, next);
    EXPECT_GT(frag.count, 0u);
    next += frag.count;
  }
  EXPECT_EQ(next, 1003u);
  EXPECT_THROW(split_fragments(layers({1, 2}), 3), std::invalid_argument);
}

TEST(FragmentsTest, StartsAreStaggeredSoOneIsInFlightAtATime) {
  const int H = 30, F = 3, tau = 5;
  EXPECT_EQ(fragment_start_step(0, F, H, tau), 5);
  EXPECT_EQ(fragment_start_step(1, F, H, tau), 15);
  EXPECT_EQ(fragment_start_step(2, F, H, tau), 25);  // completes at 30, the round's end
  EXPECT_EQ(fragment_start_step(0, 1, H, 0), H);      // blocking DiLoCo
}
