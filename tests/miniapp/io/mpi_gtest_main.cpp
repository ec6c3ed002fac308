// GoogleTest entry point for the HDF5 dump tests: MPI init/finalize, a fresh --outdir, and on
// ranks other than 0 a quiet listener that prints only failures, tagged with the rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <iostream>

#include "io_test_support.hpp"

namespace iotest {
fs::path& outdir() {
  static fs::path dir;
  return dir;
}
}  // namespace iotest

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::cerr << "[rank " << rank_ << "] " << (r.file_name() ? r.file_name() : "?") << ":" << r.line_number() << ": "
              << r.summary() << std::endl;
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  iotest::outdir() = iotest::fs::current_path() / "io_test_out";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--outdir=", 9) == 0) iotest::outdir() = argv[i] + 9;
  }
  iotest::outdir() = iotest::fs::absolute(iotest::outdir());
  if (rank == 0) {
    iotest::fs::remove_all(iotest::outdir());
    iotest::fs::create_directories(iotest::outdir());
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  // Every rank exits with the worst result, so a failure seen on one rank fails the launch.
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
