// libtorch's current CUDA stream, for code outside libtorch (the NCCL
// communicator) that must run on it. Only a CUDA build of libtorch has the
// CUDA stream API (c10_cuda); a CPU build has no stream to give.
#include "inner/inner_loop.h"

#if defined(DILOCO_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
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

std::size_t cuda_device_memory(int device) {
#if defined(DILOCO_TORCH_CUDA)
  return static_cast<std::size_t>(at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device))->totalGlobalMem);
#else
  (void)device;
  return 0;
#endif
}

std::string cuda_device_name(int device) {
#if defined(DILOCO_TORCH_CUDA)
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device))->name;
#else
  (void)device;
  return {};
#endif
}

}  // namespace diloco::inner
