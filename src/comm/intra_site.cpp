#include "comm/intra_site.h"

#include <stdexcept>

#include "comm/comm_error.h"
#if defined(DILOCO_HAVE_NCCL)
#include "comm/nccl_communicator.h"
#endif

namespace diloco::comm {

bool nccl_built() {
#if defined(DILOCO_HAVE_NCCL)
  return true;
#else
  return false;
#endif
}

IntraSiteBackend choose_intra_site(IntraSiteSetting setting, bool on_cuda, bool nccl_available) {
  switch (setting) {
    case IntraSiteSetting::kMpi:
      return IntraSiteBackend::kMpi;
    case IntraSiteSetting::kNccl:
      if (!nccl_available)
        throw std::invalid_argument(
            "comm.intra_site = \"nccl\": this build has no NCCL (configure with -DDILOCO_WITH_CUDA=ON where the CUDA "
            "toolkit and NCCL are installed)");
      if (!on_cuda)
        throw std::invalid_argument(
            "comm.intra_site = \"nccl\" needs run.device = \"cuda\": NCCL reduces device memory, and the inner steps "
            "run on the CPU");
      return IntraSiteBackend::kNccl;
    case IntraSiteSetting::kAuto:
      break;
  }
  return on_cuda && nccl_available ? IntraSiteBackend::kNccl : IntraSiteBackend::kMpi;
}

const char* to_string(IntraSiteBackend backend) { return backend == IntraSiteBackend::kNccl ? "nccl" : "mpi"; }

#if !defined(DILOCO_HAVE_NCCL)
NcclIdBytes share_nccl_id(Communicator&) { throw CommError("this build has no NCCL", -1); }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int, void*, Watchdog*) {
  throw CommError("this build has no NCCL", -1);
}
#endif

}  // namespace diloco::comm
