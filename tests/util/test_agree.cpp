// The ranks' agreement on one rank's message, at 3 ranks: which rank wins (the answers written
// out by hand for each case) and that every rank receives its text whole.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "util/agree.hpp"

namespace {

int rank_of_world() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

TEST(Agree, NoFailureHasNoRoot) {
  const minipipe::util::EarliestText e = minipipe::util::first_failure(MPI_COMM_WORLD, nullptr);
  EXPECT_EQ(e.root, -1);
  EXPECT_EQ(e.text, "");
}

TEST(Agree, TheLowestFailingRankIsNamedOnEveryRank) {
  const int rank = rank_of_world();
  // Ranks 1 and 2 fail; rank 1's message wins, with its length and an embedded NUL intact.
  const std::string mine = rank == 1 ? std::string("disk full on node b\0x", 21) : "rank 2: bad file";
  const minipipe::util::EarliestText e = minipipe::util::first_failure(MPI_COMM_WORLD, rank == 0 ? nullptr : &mine);
  EXPECT_EQ(e.root, 1);
  EXPECT_EQ(e.text, std::string("disk full on node b\0x", 21));
}

TEST(Agree, TheSmallestKeyWinsAndTiesGoToTheLowerRank) {
  const int rank = rank_of_world();
  const double keys[3] = {5.0, 2.5, 2.5};  // ranks 1 and 2 tie on the smallest key
  const minipipe::util::EarliestText e =
      minipipe::util::earliest_text(MPI_COMM_WORLD, true, keys[rank], "step " + std::to_string(rank));
  EXPECT_EQ(e.root, 1);
  EXPECT_EQ(e.text, "step 1");
  // Only rank 0 has one: it wins whatever its key.
  const minipipe::util::EarliestText only0 = minipipe::util::earliest_text(MPI_COMM_WORLD, rank == 0, 1e300, "zero");
  EXPECT_EQ(only0.root, 0);
  EXPECT_EQ(only0.text, "zero");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = size == 3 ? RUN_ALL_TESTS() : 1;  // the expected answers are written for 3 ranks
  if (size != 3 && rank_of_world() == 0) std::cerr << "test_agree: run it at 3 ranks (got " << size << ")\n";
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
