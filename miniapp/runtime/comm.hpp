// MPI facts the runtime and the driver share: how boundary buffers reach MPI (device memory,
// host staging), the largest message tag this MPI accepts, and the MPI type of a real.
#pragma once

#include <mpi.h>

#include <ostream>
#include <string>

namespace minipipe {

// How boundary buffers reach MPI.
enum class CommPath { host_memory, device_buffers, host_staging };
const char* to_string(CommPath p);
// Chooses the path from the deck's pipeline.cuda_aware (auto | on | off), the memory space and
// what the MPI library says at compile time (MPIX_CUDA_AWARE_SUPPORT) and run time
// (MPIX_Query_cuda_support). `why` says how the choice was made.
CommPath choose_comm_path(const std::string& cuda_aware, std::string& why);

// MPI_TAG_UB of `comm` (32767, the least the standard allows, if the attribute is missing).
int mpi_tag_ub(MPI_Comm comm);

// Collective: true when any rank passes an error. The lowest failing rank's message is printed
// once, by rank 0, so a problem seen on one rank only (a node-local file) is still named.
bool any_rank_failed(MPI_Comm comm, const std::string* error, std::ostream& err);

template <class T>
MPI_Datatype mpi_type() {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
  return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

}  // namespace minipipe
