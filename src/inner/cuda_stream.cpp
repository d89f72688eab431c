// libtorch's current CUDA stream, for code outside libtorch (the NCCL
// communicator) that must run on it. Only a CUDA build of libtorch has the
// CUDA stream API (c10_cuda); a CPU build has no stream to give.
#include "inner/inner_loop.h"

#if defined(DILOCO_TORCH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

namespace diloco::inner {

void* current_cuda_stream(int device) {
#if defined(DILOCO_TORCH_CUDA)
  return static_cast<void*>(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream());
#else
  (void)device;
  return nullptr;
#endif
}

}  // namespace diloco::inner
