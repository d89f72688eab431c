// The group's state on the wire (see group_state.h): a header of counts,
// then each fragment's "started" flag, the global params, every fragment's
// outer state in fragment order, the schedule's state and, last, the inner
// optimizer's state (data parallelism only).
#include "outer/group_state.h"

#include <cstring>

#include "comm/comm_error.h"

namespace diloco::outer {
namespace {

struct Header {
  std::int64_t round = 0;
  std::int64_t fragments = 0;
  std::int64_t outer_values = 0;  // all fragments' outer states together
  std::int64_t params = 0;
  std::int64_t inner_step = 0;
  std::int64_t schedule_values = 0;
  std::int64_t admit_next = 0;
  std::int64_t inner_state = 0;  // bytes
};

// The inner optimizer's state is AdamW's two moments and a few scalars per
// parameter at most: a header claiming more is not this model's.
std::int64_t max_inner_bytes(std::int64_t params) { return 4 * params * static_cast<std::int64_t>(sizeof(float)) + (1 << 20); }

}  // namespace

std::size_t group_state_header_bytes() { return sizeof(Header); }

std::vector<std::byte> encode_group_state(const GroupState& s) {
  Header h{s.round, static_cast<std::int64_t>(s.outer.size()), 0, static_cast<std::int64_t>(s.global.size()),
           s.inner_step, static_cast<std::int64_t>(s.schedule.size()), s.admit_next ? 1 : 0,
           static_cast<std::int64_t>(s.inner.size())};
  for (const auto& o : s.outer) h.outer_values += static_cast<std::int64_t>(o.size());
  std::vector<std::byte> out(sizeof h + s.outer.size() * sizeof(std::int64_t) +
                             static_cast<std::size_t>(h.params + h.outer_values) * sizeof(float) +
                             s.schedule.size() * sizeof(double) + s.inner.size());
  std::size_t at = 0;
  const auto put = [&out, &at](const void* data, std::size_t bytes) {
    if (bytes > 0) std::memcpy(out.data() + at, data, bytes);
    at += bytes;
  };
  put(&h, sizeof h);
  for (std::size_t i = 0; i < s.outer.size(); ++i) {
    const std::int64_t started = i < s.started.size() && s.started[i] ? 1 : 0;
    put(&started, sizeof started);
  }
  put(s.global.data(), s.global.size() * sizeof(float));
  for (const auto& o : s.outer) put(o.data(), o.size() * sizeof(float));
  put(s.schedule.data(), s.schedule.size() * sizeof(double));
  put(s.inner.data(), s.inner.size());
  return out;
}

std::size_t group_state_bytes(std::span<const std::byte> header, const GroupStateShape& shape) {
  Header h;
  if (header.size() < sizeof h) throw comm::CommError("the group's state is truncated", -1);
  std::memcpy(&h, header.data(), sizeof h);
  std::int64_t outer_values = 0;
  for (std::size_t v : shape.outer_values) outer_values += static_cast<std::int64_t>(v);
  const auto params = static_cast<std::int64_t>(shape.params);
  if (h.params != params || h.fragments != static_cast<std::int64_t>(shape.outer_values.size()) ||
      h.outer_values != outer_values || h.round < 0 || h.inner_step < 0 ||
      h.schedule_values < static_cast<std::int64_t>(shape.min_schedule_values) ||
      h.schedule_values > static_cast<std::int64_t>(shape.max_schedule_values) || h.inner_state < 0 ||
      (!shape.data_parallel && h.inner_state != 0) || h.inner_state > max_inner_bytes(params) ||
      (h.admit_next != 0 && h.admit_next != 1))
    throw comm::CommError("the group's state does not fit this site's model (" + std::to_string(h.params) +
                              " params, " + std::to_string(h.fragments) + " fragments, " +
                              std::to_string(h.outer_values) + " outer values, " +
                              std::to_string(h.schedule_values) + " schedule values, " +
                              std::to_string(h.inner_state) + " bytes of inner state, round " +
                              std::to_string(h.round) + "; this site has " + std::to_string(shape.params) +
                              " params, " + std::to_string(shape.outer_values.size()) + " fragments, " +
                              std::to_string(outer_values) + " outer values" +
                              (shape.data_parallel ? "" : ", no inner state") + ")",
                          -1);
  return sizeof h + static_cast<std::size_t>(h.fragments) * sizeof(std::int64_t) +
         static_cast<std::size_t>(h.params + h.outer_values) * sizeof(float) +
         static_cast<std::size_t>(h.schedule_values) * sizeof(double) + static_cast<std::size_t>(h.inner_state);
}

GroupState decode_group_state(std::span<const std::byte> bytes, const GroupStateShape& shape) {
  if (bytes.size() != group_state_bytes(bytes, shape))
    throw comm::CommError("the group's state has " + std::to_string(bytes.size()) + " bytes; its header says " +
                              std::to_string(group_state_bytes(bytes, shape)),
                          -1);
  std::size_t at = 0;
  const auto take = [&bytes, &at](void* data, std::size_t size) {
    if (size > 0) std::memcpy(data, bytes.data() + at, size);
    at += size;
  };
  Header h;
  take(&h, sizeof h);
  GroupState s;
  s.round = h.round;
  s.inner_step = h.inner_step;
  s.admit_next = h.admit_next != 0;
  for (std::size_t i = 0; i < shape.outer_values.size(); ++i) {
    std::int64_t started = 0;
    take(&started, sizeof started);
    if (started != 0 && started != 1)
      throw comm::CommError("the group's state: fragment " + std::to_string(i) + "'s started flag is " +
                                std::to_string(started),
                            -1);
    s.started.push_back(started != 0);
  }
  s.global.resize(shape.params);
  take(s.global.data(), s.global.size() * sizeof(float));
  for (std::size_t v : shape.outer_values) {
    s.outer.emplace_back(v);
    take(s.outer.back().data(), v * sizeof(float));
  }
  s.schedule.resize(static_cast<std::size_t>(h.schedule_values));
  take(s.schedule.data(), s.schedule.size() * sizeof(double));
  s.inner.resize(static_cast<std::size_t>(h.inner_state));
  take(s.inner.data(), s.inner.size());
  return s;
}

std::string sealing_context(const char* kind, int epoch, std::int64_t round, int sender) {
  return std::string("diloco-") + kind + ":" + std::to_string(epoch) + ":" + std::to_string(round) + ":" +
         std::to_string(sender) + ":";
}

}  // namespace diloco::outer
