// The group's state a site takes from another (a site that joins late, a
// survivor behind after a loss) and the step average a data-parallel
// survivor behind takes: written and read back; every header field that
// does not fit the receiving site's model refused before anything is
// allocated from it; a truncated, padded or flag-tampered message refused;
// with a key, a flipped byte or a message replayed under another epoch,
// step or sender fails its check.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/comm_error.h"
#include "comm/message_auth.h"
#include "outer/group_state.h"

using namespace diloco;
using namespace diloco::outer;

namespace {

GroupState sample(bool data_parallel) {
  GroupState s;
  s.round = 7;
  s.inner_step = 140;
  s.admit_next = true;
  s.started = {true, false};
  s.global = {0.5f, -1.25f, 3.0f, 0.0f, 2.5f};
  s.outer = {{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f}};
  s.schedule = std::vector<double>(11, 0.25);
  if (data_parallel) s.inner = std::string("adamw moments\0and step", 22);
  return s;
}

GroupStateShape shape_of(bool data_parallel) {
  GroupStateShape shape;
  shape.params = 5;
  shape.outer_values = {3, 2};
  shape.data_parallel = data_parallel;
  shape.min_schedule_values = 8;
  shape.max_schedule_values = 14;
  return shape;
}

// The message of the CommError `f` throws ("" when none).
template <class F>
std::string refusal(F f) {
  try {
    f();
  } catch (const comm::CommError& e) {
    return e.what();
  }
  return "";
}

// Sets the header's `field`-th 64-bit word.
std::vector<std::byte> with_word(std::vector<std::byte> bytes, int field, std::int64_t value) {
  std::memcpy(bytes.data() + field * sizeof(std::int64_t), &value, sizeof value);
  return bytes;
}

}  // namespace

TEST(GroupStateTest, WrittenAndReadBack) {
  for (bool dp : {false, true}) {
    const auto s = sample(dp);
    const auto bytes = encode_group_state(s);
    EXPECT_EQ(group_state_bytes(std::span(bytes).first(group_state_header_bytes()), shape_of(dp)), bytes.size());
    const auto back = decode_group_state(bytes, shape_of(dp));
    EXPECT_EQ(back.round, 7);
    EXPECT_EQ(back.inner_step, 140);
    EXPECT_TRUE(back.admit_next);
    EXPECT_EQ(back.started, s.started);
    EXPECT_EQ(back.global, s.global);
    EXPECT_EQ(back.outer, s.outer);
    EXPECT_EQ(back.schedule, s.schedule);
    EXPECT_EQ(back.inner, s.inner);
  }
}

// Header words: round, fragments, outer values, params, inner step,
// schedule values, admit_next, inner state bytes. Each is checked from the
// header alone (what a receiver holds before it sizes the rest).
TEST(GroupStateTest, AHeaderThatDoesNotFitIsRefusedBeforeAnythingIsSized) {
  const auto header = [](bool dp) {
    auto b = encode_group_state(sample(dp));
    b.resize(group_state_header_bytes());
    return b;
  };
  struct Case {
    int field;
    std::int64_t value;
    bool data_parallel;
  };
  const Case cases[] = {
      {0, -1, false},                    // a negative round
      {1, 3, false},                     // another fragment count
      {2, 6, false},                     // other outer state sizes
      {3, 6, false},                     // another model's params
      {3, std::int64_t{1} << 60, false}, // a size that would exhaust memory
      {4, -5, false},                    // a negative inner step
      {5, 7, false},                     // fewer schedule values than a schedule has
      {5, 15, false},                    // more than this group's sites can have
      {6, 2, false},                     // admit_next is a flag
      {7, 16, false},                    // an inner state where DiLoCo keeps each site's own
      {7, -1, true},
      {7, std::int64_t{1} << 40, true},  // more than an optimizer of this model holds
  };
  for (const auto& c : cases) {
    const auto bytes = with_word(header(c.data_parallel), c.field, c.value);
    const auto why = refusal([&] { group_state_bytes(bytes, shape_of(c.data_parallel)); });
    EXPECT_NE(why.find("does not fit this site's model"), std::string::npos) << c.field << " = " << c.value << ": " << why;
  }
  const auto cut = header(false);
  EXPECT_NE(refusal([&] { group_state_bytes(std::span(cut).first(10), shape_of(false)); }).find("truncated"),
            std::string::npos);
}

TEST(GroupStateTest, AMessageOfAnotherSizeOrWithABadFlagIsRefused) {
  auto bytes = encode_group_state(sample(true));
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_NE(refusal([&] { decode_group_state(longer, shape_of(true)); }).find("its header says"), std::string::npos);
  auto shorter = bytes;
  shorter.pop_back();
  EXPECT_NE(refusal([&] { decode_group_state(shorter, shape_of(true)); }).find("its header says"), std::string::npos);
  // The first fragment's "started" flag follows the header.
  auto flag = with_word(bytes, 8, 5);
  EXPECT_NE(refusal([&] { decode_group_state(flag, shape_of(true)); }).find("started flag is 5"), std::string::npos);
}

TEST(GroupStateTest, ASealedStateOrStepAverageFailsWhenTamperedOrReplayed) {
  const comm::MessageAuth auth(std::string(32, 'k'));
  // The state rank 0 sends in epoch 3, and the average of step 12 rank 1 sends.
  const auto state = encode_group_state(sample(true));
  std::vector<std::byte> average(5 * sizeof(float), std::byte{1});
  struct Message {
    std::vector<std::byte> bytes;
    std::string context;
    std::vector<std::string> replays;  // the same message taken as another
  };
  const Message messages[] = {
      {state, sealing_context("state", 3, 0, 0),
       {sealing_context("state", 2, 0, 0), sealing_context("state", 3, 0, 1), sealing_context("step", 3, 0, 0)}},
      {average, sealing_context("step", 3, 12, 1),
       {sealing_context("step", 3, 11, 1), sealing_context("step", 4, 12, 1), sealing_context("step", 3, 12, 2),
        sealing_context("report", 3, 12, 1)}},
  };
  for (const auto& m : messages) {
    auto sealed = m.bytes;
    auth.seal(m.context, sealed);
    auto ok = sealed;
    ASSERT_TRUE(auth.unseal(m.context, ok));
    EXPECT_EQ(ok, m.bytes);
    for (std::size_t at : {std::size_t{0}, sealed.size() / 2, sealed.size() - 1}) {
      auto flipped = sealed;
      flipped[at] ^= std::byte{0x10};
      EXPECT_FALSE(auth.unseal(m.context, flipped)) << m.context << " byte " << at;
    }
    for (const auto& other : m.replays) {
      auto replayed = sealed;
      EXPECT_FALSE(auth.unseal(other, replayed)) << m.context << " taken as " << other;
    }
  }
}
