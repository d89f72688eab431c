// Blocks kept by size, handed out newest first, given back oldest first.
#include "inner/host_block_cache.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace diloco::inner {

namespace {

// Each block starts with a header (its size and its cache), one alignment
// unit long so the tensor's bytes keep libtorch's 64-byte alignment.
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kHeader = kAlignment;

struct Header {
  std::size_t size;
  const HostBlockCache* owner;
};
static_assert(sizeof(Header) <= kHeader);

Header& header(void* block) { return *static_cast<Header*>(block); }

}  // namespace

HostBlockCache::~HostBlockCache() {
  for (auto& [size, blocks] : kept_)
    for (const auto& k : blocks) std::free(k.block);
}

c10::DataPtr HostBlockCache::allocate(std::size_t n) const {
  void* block = take(n);
  void* data = block ? static_cast<char*>(block) + kHeader : nullptr;
  return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
}

c10::DeleterFnPtr HostBlockCache::raw_deleter() const { return &release; }

HostBlockCacheStats HostBlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void HostBlockCache::release(void* data) {
  if (!data) return;
  void* block = static_cast<char*>(data) - kHeader;
  header(block).owner->keep(block);
}

void* HostBlockCache::take(std::size_t n) const {
  if (n == 0) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.find(n);
    if (it != kept_.end()) {
      const Kept newest = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) kept_.erase(it);
      by_age_.erase(newest.order);
      stats_.kept_bytes -= n;
      stats_.reused++;
      count_in_use(n);
      return newest.block;
    }
    stats_.allocated++;
    count_in_use(n);
  }
  void* block = nullptr;
  if (posix_memalign(&block, kAlignment, kHeader + n) != 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use_bytes -= n;
    throw std::bad_alloc();
  }
  header(block) = {n, this};
  return block;
}

void HostBlockCache::keep(void* block) const {
  const std::size_t n = header(block).size;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t order = next_order_++;
  kept_[n].push_back({block, order});
  by_age_.emplace(order, n);
  stats_.in_use_bytes -= n;
  stats_.kept_bytes += n;
  while (stats_.kept_bytes > stats_.peak_in_use_bytes) give_back_oldest();
}

// The callers below hold the mutex.
void HostBlockCache::count_in_use(std::size_t n) const {
  stats_.in_use_bytes += n;
  if (stats_.in_use_bytes > stats_.peak_in_use_bytes) stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

void HostBlockCache::give_back_oldest() const {
  const auto oldest = by_age_.begin();
  const std::size_t n = oldest->second;
  auto& blocks = kept_.at(n);
  std::free(blocks.front().block);  // a size's blocks are kept in the order freed
  blocks.pop_front();
  if (blocks.empty()) kept_.erase(n);
  by_age_.erase(oldest);
  stats_.kept_bytes -= n;
  stats_.released++;
}

HostBlockCache& host_block_cache() {
  static auto* instance = new HostBlockCache();  // never destroyed: see the header
  return *instance;
}

bool host_block_cache_wanted() {
  const char* set = std::getenv("DILOCO_HOST_BLOCK_CACHE");
  if (!set || std::strcmp(set, "1") == 0) return true;
  if (std::strcmp(set, "0") == 0) return false;
  throw std::invalid_argument(std::string("DILOCO_HOST_BLOCK_CACHE is \"") + set +
                              "\": 1 (the host block cache, the default) or 0 (libtorch's own allocator)");
}

void use_host_block_cache() {
  if (!host_block_cache_wanted()) return;
  // Above the priority libtorch registers its own CPU allocator with.
  c10::SetCPUAllocator(&host_block_cache(), /*priority=*/1);
}

}  // namespace diloco::inner
