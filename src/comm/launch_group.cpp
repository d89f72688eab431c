// Collectives over every rank of several launches (see launch_group.h).
#include "comm/launch_group.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace diloco::comm {
namespace {

// Buffers as one: their count, each one's length, then their bytes.
std::vector<std::byte> pack(const std::vector<std::vector<std::byte>>& buffers) {
  std::vector<std::uint64_t> head{buffers.size()};
  for (const auto& b : buffers) head.push_back(b.size());
  std::vector<std::byte> out(head.size() * sizeof(std::uint64_t));
  std::memcpy(out.data(), head.data(), out.size());
  for (const auto& b : buffers) out.insert(out.end(), b.begin(), b.end());
  return out;
}

std::vector<std::vector<std::byte>> unpack(std::span<const std::byte> bytes) {
  const auto word = [&](std::size_t i) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
    return v;
  };
  const std::size_t count = word(0);
  std::size_t at = (count + 1) * sizeof(std::uint64_t);
  std::vector<std::vector<std::byte>> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t length = word(i + 1);
    out[i].assign(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  return out;
}

}  // namespace

LaunchGroup::LaunchGroup(Communicator& local, Communicator* leaders, int place) : local_(local), leaders_(leaders) {
  form(place);
}

LaunchGroup::LaunchGroup(std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> leaders, int place)
    : owned_local_(std::move(local)), owned_leaders_(std::move(leaders)), local_(*owned_local_),
      leaders_(owned_leaders_.get()) {
  form(place);
}

// The leaders tell each other their place and size; each launch learns the
// numbering from its leader.
void LaunchGroup::form(int place) {
  place_ = place;
  std::vector<std::int64_t> table;  // per launch in place order: first rank, leader's rank; then the total
  if (local_.rank() == 0) {
    struct Launch {
      std::int64_t place, size, leader;
    };
    std::vector<Launch> launches{{place, local_.size(), 0}};
    if (leaders_) {
      const std::int64_t mine[2] = {place, local_.size()};
      const auto all = leaders_->all_gather(std::as_bytes(std::span<const std::int64_t>(mine, 2)));
      launches.clear();
      for (std::size_t r = 0; r < all.size(); ++r) {
        std::int64_t v[2];
        std::memcpy(v, all[r].data(), sizeof v);
        launches.push_back({v[0], v[1], static_cast<std::int64_t>(r)});
      }
      std::sort(launches.begin(), launches.end(), [](const Launch& a, const Launch& b) { return a.place < b.place; });
      for (std::size_t i = 1; i < launches.size(); ++i)
        if (launches[i].place == launches[i - 1].place)
          throw std::invalid_argument("two launches take place " + std::to_string(launches[i].place));
    }
    std::int64_t next = 0;
    for (const auto& l : launches) {
      table.push_back(next);
      table.push_back(l.leader);
      next += l.size;
    }
    table.push_back(next);
  }
  const auto bytes = share_in_launch(std::vector<std::byte>(reinterpret_cast<const std::byte*>(table.data()),
                                                            reinterpret_cast<const std::byte*>(table.data() + table.size())));
  table.resize(bytes.size() / sizeof(std::int64_t));
  std::memcpy(table.data(), bytes.data(), bytes.size());
  first_ranks_.clear();
  leader_ranks_.clear();
  for (std::size_t i = 0; i + 1 < table.size(); i += 2) {
    first_ranks_.push_back(static_cast<int>(table[i]));
    leader_ranks_.push_back(static_cast<int>(table[i + 1]));
  }
  size_ = static_cast<int>(table.back());
  const int my_leader = leaders_ ? leaders_->rank() : 0;  // meaningful on the leader; the others ask it
  std::int64_t first = 0;
  if (local_.rank() == 0)
    for (std::size_t i = 0; i < leader_ranks_.size(); ++i)
      if (leader_ranks_[i] == my_leader) first = first_ranks_[i];
  if (local_.size() > 1) local_.broadcast(std::as_writable_bytes(std::span<std::int64_t>(&first, 1)), 0);
  first_rank_ = static_cast<int>(first);
}

std::vector<std::byte> LaunchGroup::share_in_launch(std::vector<std::byte> bytes) {
  if (local_.size() == 1) return bytes;
  std::uint64_t length = bytes.size();
  local_.broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&length, 1)), 0);
  bytes.resize(length);
  if (length > 0) local_.broadcast(std::span<std::byte>(bytes), 0);
  return bytes;
}

void LaunchGroup::all_reduce_sum(std::span<double> data) {
  local_.all_reduce_sum(data);
  if (local_.rank() == 0 && leaders_) leaders_->all_reduce_sum(data);
  if (local_.size() > 1) local_.broadcast(std::as_writable_bytes(data), 0);
}

std::vector<std::vector<std::byte>> LaunchGroup::all_gather(std::span<const std::byte> mine) {
  auto blocks = local_.all_gather(mine);
  std::vector<std::byte> everyone;
  if (local_.rank() == 0) {
    if (leaders_) {
      const auto launches = leaders_->all_gather(pack(blocks));
      blocks.clear();
      for (int leader : leader_ranks_)
        for (auto& b : unpack(launches[static_cast<std::size_t>(leader)])) blocks.push_back(std::move(b));
    }
    everyone = pack(blocks);
  }
  return unpack(share_in_launch(std::move(everyone)));
}

void LaunchGroup::barrier() {
  local_.barrier();
  if (local_.rank() == 0 && leaders_) leaders_->barrier();
  local_.barrier();
}

std::unique_ptr<LaunchGroup> LaunchGroup::duplicate() {
  auto local = local_.duplicate();
  std::unique_ptr<Communicator> leaders = leaders_ ? leaders_->duplicate() : nullptr;
  return std::unique_ptr<LaunchGroup>(new LaunchGroup(std::move(local), std::move(leaders), place_));
}

}  // namespace diloco::comm
