#include "util/agree.hpp"

#include <climits>
#include <cmath>

namespace minipipe::util {

std::string broadcast_text(MPI_Comm comm, int root, const std::string& text) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string out = rank == root ? text : std::string();
  int len = static_cast<int>(out.size());
  MPI_Bcast(&len, 1, MPI_INT, root, comm);
  out.resize(static_cast<std::size_t>(len));
  MPI_Bcast(out.data(), len, MPI_CHAR, root, comm);
  return out;
}

EarliestText earliest_text(MPI_Comm comm, bool has, double key, const std::string& text) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  struct {
    double key;
    int rank;
  } mine{has ? key : HUGE_VAL, has ? rank : INT_MAX}, first{};
  MPI_Allreduce(&mine, &first, 1, MPI_DOUBLE_INT, MPI_MINLOC, comm);
  if (first.rank == INT_MAX) return {};
  return {first.rank, broadcast_text(comm, first.rank, text)};
}

EarliestText first_failure(MPI_Comm comm, const std::string* error) {
  return earliest_text(comm, error != nullptr, 0.0, error ? *error : std::string());
}

}  // namespace minipipe::util
