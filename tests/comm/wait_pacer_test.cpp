// The pacing of waits that must not take a core: short pauses early, then
// a fixed share of the time waited, never above the longest pause.
#include "comm/wait_pacer.h"

#include <gtest/gtest.h>

namespace diloco::comm {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(WaitPacer, StartsWithTheShortestPause) {
  EXPECT_EQ(WaitPacer::pause_after(microseconds(0)), WaitPacer::kFirst);
  EXPECT_EQ(WaitPacer::pause_after(microseconds(100)), WaitPacer::kFirst);
}

TEST(WaitPacer, PausesAShareOfTheTimeWaited) {
  // What a pause adds to noticing the end stays within 1/kShare of the wait.
  for (auto waited : {milliseconds(10), milliseconds(100), milliseconds(500)}) {
    const auto pause = WaitPacer::pause_after(waited);
    EXPECT_EQ(pause, std::chrono::duration_cast<microseconds>(waited) / WaitPacer::kShare);
    EXPECT_LE(pause * WaitPacer::kShare, std::chrono::duration_cast<microseconds>(waited));
  }
}

TEST(WaitPacer, NeverPausesLongerThanTheLongest) {
  EXPECT_EQ(WaitPacer::pause_after(std::chrono::seconds(10)), WaitPacer::kLongest);
  EXPECT_EQ(WaitPacer::pause_after(std::chrono::hours(1)), WaitPacer::kLongest);
}

TEST(WaitPacer, PauseSleepsAboutThatLong) {
  WaitPacer pacer;
  const auto t0 = std::chrono::steady_clock::now();
  pacer.pause();
  const auto slept = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(slept, WaitPacer::kFirst);  // a sleep lasts at least what it asked for
}

}  // namespace
}  // namespace diloco::comm
