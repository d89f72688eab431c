// A caching allocator for the CPU tensors of this process. libtorch asks
// the system for every tensor and gives it back when the tensor goes, so a
// step's activations and gradients, freed at the end of each step, come back
// the next step as fresh pages (a page fault each, zeroed by the kernel) or
// as blocks that left the caches long ago: elementwise operators such as
// GELU ran at half their speed inside the step (bench/profile_step.py). This
// one keeps each freed block by its size and hands the most recently freed
// block of that size to the next request, as libtorch's CUDA allocator does
// for device memory; a training step's sizes repeat, so after its first step
// it asks the system for nothing.
//
// What it keeps is bounded by the most bytes the process ever had in use at
// once: a free that would keep more gives the longest-kept blocks back to
// the system. In use plus kept is then at most twice that peak; in a training
// step it is the step's working set (the quickstart model: 1.17x the peak in
// use, and the 25M model's peak RSS 8% below glibc's allocator's).
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>

namespace diloco::inner {

struct HostBlockCacheStats {
  std::size_t in_use_bytes = 0;  // blocks handed out and not yet freed
  std::size_t kept_bytes = 0;    // freed blocks kept for reuse
  std::size_t peak_in_use_bytes = 0;
  std::uint64_t reused = 0;      // requests served from kept blocks
  std::uint64_t allocated = 0;   // requests that went to the system
  std::uint64_t released = 0;    // kept blocks given back to the system
};

class HostBlockCache final : public c10::Allocator {
 public:
  HostBlockCache() = default;
  // Gives the kept blocks back; every block it handed out must be freed first.
  ~HostBlockCache() override;
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  c10::DataPtr allocate(std::size_t n) const override;
  c10::DeleterFnPtr raw_deleter() const override;
  HostBlockCacheStats stats() const;

 private:
  struct Kept {
    void* block;
    std::uint64_t order;  // when it was freed
  };
  static void release(void* data);
  void* take(std::size_t n) const;
  void keep(void* block) const;
  void count_in_use(std::size_t n) const;
  void give_back_oldest() const;

  // libtorch's Allocator interface is const; the cache's state is not.
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::size_t, std::deque<Kept>> kept_;  // by size, oldest first
  mutable std::map<std::uint64_t, std::size_t> by_age_;             // freed order -> size
  mutable std::uint64_t next_order_ = 0;
  mutable HostBlockCacheStats stats_;
};

// The process's cache, created on first use and never destroyed (tensors may
// be freed during static destruction).
HostBlockCache& host_block_cache();

// Whether the process should use it: yes unless the environment sets
// DILOCO_HOST_BLOCK_CACHE=0 (libtorch's own allocator, glibc's malloc: for a
// memory checker, or to let RSS follow the memory in use). Any value but 0
// or 1 throws std::invalid_argument naming the variable.
bool host_block_cache_wanted();

// Makes it libtorch's CPU allocator for tensors created from now on (tensors
// that exist keep the allocator that made them), unless unwanted (above).
// Idempotent.
void use_host_block_cache();

}  // namespace diloco::inner
