// bf16 autocast for forward passes, on the CPU or CUDA, as a scope. The state
// is thread-local; cast weights are cached until the outermost scope ends.
// libtorch 2.4 replaced the per-device functions with device-typed ones.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace diloco::inner {

class AutocastScope {
 public:
  AutocastScope(bool on, bool cuda) : on_(on), cuda_(cuda) {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    const auto type = cuda_ ? at::kCUDA : at::kCPU;
    was_on_ = at::autocast::is_autocast_enabled(type);
    at::autocast::set_autocast_dtype(type, at::kBFloat16);
    at::autocast::set_autocast_enabled(type, true);
#else
    if (cuda_) {
      was_on_ = at::autocast::is_enabled();
      at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
      at::autocast::set_enabled(true);
    } else {
      was_on_ = at::autocast::is_cpu_enabled();
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
#endif
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(cuda_ ? at::kCUDA : at::kCPU, was_on_);
#else
    if (cuda_) at::autocast::set_enabled(was_on_);
    else at::autocast::set_cpu_enabled(was_on_);
#endif
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_;
  bool cuda_;
  bool was_on_ = false;
};

}  // namespace diloco::inner
