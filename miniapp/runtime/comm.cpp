// The boundary-transfer path chosen from the deck and the MPI library's GPU awareness, and the
// MPI_TAG_UB query, each in one place.
#include "miniapp/runtime/comm.hpp"

#include <ostream>
#include <sstream>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include "kernels/types.hpp"
#include "miniapp/io/message_text.hpp"
#include "miniapp/model/config.hpp"
#include "util/agree.hpp"

namespace minipipe {

const char* to_string(CommPath p) {
  switch (p) {
    case CommPath::host_memory:
      return "host memory (buffers are host-resident; no staging needed)";
    case CommPath::device_buffers:
      return "device buffers passed to CUDA-aware MPI";
    case CommPath::host_staging:
      return "host staging through pooled buffers (page-locked on CUDA and HIP)";
  }
  return "?";
}

CommPath choose_comm_path(const std::string& cuda_aware, std::string& why) {
  const bool host_accessible = Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
  // Only the query that matches the backend counts: a CUDA-aware Open MPI says nothing about
  // HIP buffers.
  bool compiled = false, runtime = false;
#if defined(KOKKOS_ENABLE_CUDA) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  compiled = true;
  runtime = MPIX_Query_cuda_support() == 1;
#elif defined(KOKKOS_ENABLE_HIP) && defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
  compiled = true;
  runtime = MPIX_Query_rocm_support() == 1;
#endif
  std::ostringstream os;
  os << "GPU-aware MPI (MPIX_CUDA/ROCM_AWARE_SUPPORT) at compile time: " << (compiled ? "yes" : "no")
     << ", at run time (MPIX_Query_*_support): " << (runtime ? "yes" : "no") << ", memory space: " << MemSpace::name()
     << ", pipeline.cuda_aware = " << cuda_aware;
  why = os.str();
  if (cuda_aware == "off") return CommPath::host_staging;
  if (cuda_aware == "on") return host_accessible ? CommPath::host_memory : CommPath::device_buffers;
  if (cuda_aware != "auto") key_error("pipeline.cuda_aware", "\"" + cuda_aware + "\"", "auto | on | off");
  if (host_accessible) return CommPath::host_memory;
  return runtime ? CommPath::device_buffers : CommPath::host_staging;
}

bool any_rank_failed(MPI_Comm comm, const std::string* error, std::ostream& err) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // The lowest failing rank's message is the one reported, by rank 0, whichever rank it was.
  const util::EarliestText e = util::first_failure(comm, error);
  if (e.root < 0) return false;
  const int first = e.root;
  const std::string& text = e.text;
  if (rank == 0)
    err << "minipipe: error" << (first != 0 ? " (rank " + std::to_string(first) + ")" : "") << ": "
        << escaped_controls(text) << "\n";
  return true;
}

int mpi_tag_ub(MPI_Comm comm) {
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  return flag && ub ? *ub : 32767;
}

}  // namespace minipipe
