// Buffers kept for operations given up (see operation_buffers.h).
#include "comm/operation_buffers.h"

#include <exception>
#include <mutex>

namespace diloco::comm {
namespace {

struct Kept {
  std::mutex mutex;
  std::deque<std::vector<std::byte>> buffers;
  std::size_t bytes = 0;
};

// Never destroyed: the transport may touch these buffers during
// MPI_Finalize, after static destructors would have run.
Kept& kept() {
  static Kept* all = new Kept;
  return *all;
}

}  // namespace

OperationBuffers::OperationBuffers() : exceptions_(std::uncaught_exceptions()) {}

OperationBuffers::~OperationBuffers() {
  if (std::uncaught_exceptions() <= exceptions_ || buffers_.empty()) return;
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  for (auto& b : buffers_) {
    k.bytes += b.size();
    k.buffers.push_back(std::move(b));  // a moved vector keeps its storage where it was
  }
}

std::span<std::byte> OperationBuffers::make(std::size_t bytes) {
  buffers_.emplace_back(bytes);
  return buffers_.back();
}

std::span<std::byte> OperationBuffers::copy(std::span<const std::byte> from) {
  buffers_.emplace_back(from.begin(), from.end());
  return buffers_.back();
}

std::size_t OperationBuffers::kept_bytes() {
  Kept& k = kept();
  std::lock_guard<std::mutex> lock(k.mutex);
  return k.bytes;
}

}  // namespace diloco::comm
