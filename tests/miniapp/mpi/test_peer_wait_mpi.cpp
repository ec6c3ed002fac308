// wait_for_peer on two real MPI ranks: a message that never comes expires after the timeout and
// the error names the rank, the awaited action and the peer; messages that do come, late or
// with timeout 0 (forever), complete normally.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "miniapp/mpi/peer_wait.hpp"

namespace {

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class PeerWait : public ::testing::Test {
 protected:
  void SetUp() override {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) GTEST_SKIP() << "needs exactly 2 ranks";
  }
};

TEST_F(PeerWait, MessageThatNeverComesExpiresNamingActionAndPeer) {
  if (rank() == 0) {
    int v = 0;
    MPI_Request req;
    MPI_Irecv(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &req);
    const auto t0 = std::chrono::steady_clock::now();
    std::string msg;
    try {
      minipipe::wait_for_peer(req, 0.3,
                              [] { return std::string("the activation of micro-batch 3 (1F3) from rank 1"); });
    } catch (const minipipe::PeerTimeout& e) {
      msg = e.what();
    }
    const double waited = seconds_since(t0);
    EXPECT_GE(waited, 0.3);
    EXPECT_LT(waited, 5.0);
    EXPECT_TRUE(contains(msg, "rank 0 waited 0.3 s for the activation of micro-batch 3 (1F3) from rank 1")) << msg;
    EXPECT_TRUE(contains(msg, "pipeline.timeout = 0.3")) << msg;
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(PeerWait, LateMessageWithinTheTimeoutAndTimeoutZeroComplete) {
  for (double timeout : {5.0, 0.0}) {
    if (rank() == 0) {
      int v = 0;
      MPI_Request req;
      MPI_Irecv(&v, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, &req);
      EXPECT_NO_THROW(minipipe::wait_for_peer(req, timeout, [] { return std::string("x"); }));
      EXPECT_EQ(v, 42);
      EXPECT_EQ(req, MPI_REQUEST_NULL);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      const int v = 42;
      MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_F(PeerWait, SeveralRequestsNameOnlyThoseStillPending) {
  if (rank() == 0) {
    int a = 0, b = 0;
    MPI_Request reqs[2];
    MPI_Irecv(&a, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(&b, 1, MPI_INT, 1, 10, MPI_COMM_WORLD, &reqs[1]);  // never sent
    std::string msg;
    try {
      minipipe::wait_for_peers(2, reqs, 0.5, [](int i) { return "request " + std::to_string(i) + " from rank 1"; });
    } catch (const minipipe::PeerTimeout& e) {
      msg = e.what();
    }
    EXPECT_EQ(a, 5);
    EXPECT_TRUE(contains(msg, "request 1 from rank 1")) << msg;
    EXPECT_FALSE(contains(msg, "request 0")) << msg;
    MPI_Cancel(&reqs[1]);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
  } else {
    const int v = 5;
    MPI_Send(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
