// Every rank of several launches (sites launched apart, each its own mpirun)
// as one group, for the few collectives a measurement of the whole group
// needs: sums, gathers and barriers. No communicator spans the launches (only
// their leaders share one: the membership's), so each collective runs inside
// the launch, then between the leaders, then back inside the launch. Ranks
// are numbered launch after launch in the order of their `place` (a site's
// index), each launch's ranks in their own order. With no leaders'
// communicator (one launch holds every rank) it is that launch's
// communicator and nothing more.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.h"

namespace diloco::comm {

class LaunchGroup {
 public:
  // Collective over every rank of every launch. `local`: this launch's ranks;
  // `leaders`: the launches' leaders (each launch's rank 0) on a leader,
  // nullptr elsewhere and when there is one launch; `place`: this launch's
  // place in the numbering (distinct across launches). Both communicators
  // must outlive the group.
  LaunchGroup(Communicator& local, Communicator* leaders, int place);

  int rank() const { return first_rank_ + local_.rank(); }
  int size() const { return size_; }
  // Per launch, in place order: its first rank in the group, and its
  // leader's rank in `leaders`.
  const std::vector<int>& launch_first_ranks() const { return first_ranks_; }
  const std::vector<int>& launch_leaders() const { return leader_ranks_; }

  // In-place sum over every rank.
  void all_reduce_sum(std::span<double> data);
  // Every rank's buffer (any length), indexed by group rank.
  std::vector<std::vector<std::byte>> all_gather(std::span<const std::byte> mine);
  void barrier();

  // A group over duplicates of both communicators (owned by it), whose
  // messages never match this one's: another thread may use it meanwhile.
  std::unique_ptr<LaunchGroup> duplicate();

 private:
  LaunchGroup(std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> leaders, int place);
  void form(int place);
  // The leader's bytes on every rank of the launch.
  std::vector<std::byte> share_in_launch(std::vector<std::byte> bytes);

  std::unique_ptr<Communicator> owned_local_, owned_leaders_;
  Communicator& local_;
  Communicator* leaders_;
  int place_ = 0;
  int first_rank_ = 0;
  int size_ = 0;
  std::vector<int> first_ranks_;   // by place order
  std::vector<int> leader_ranks_;  // by place order: that launch's leader's rank in leaders_
};

}  // namespace diloco::comm
