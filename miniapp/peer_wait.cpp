// wait_for_peer: MPI_Test polling against a deadline, with a sleep that grows from a few
// microseconds to a millisecond so that short waits stay fast and long ones cost no CPU.
#include "peer_wait.hpp"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "message_text.hpp"

namespace minipipe {

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::string expired(double timeout_s, const std::string& what) {
  return "rank " + std::to_string(world_rank()) + " waited " + compact_number(timeout_s) + " s for " + what +
         " and gave up (pipeline.timeout = " + compact_number(timeout_s) +
         "); the peer is stopped, hung or far slower; aborting the job";
}

// Calls `done()` until it is true or the deadline passes; false on expiry.
template <class Done>
bool poll_until(double timeout_s, Done done) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::microseconds(2);
  while (!done()) {
    if (clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

}  // namespace

void wait_for_peer(MPI_Request& request, double timeout_s, const std::function<std::string()>& describe,
                   MPI_Status* status) {
  if (timeout_s <= 0) {
    MPI_Wait(&request, status);
    return;
  }
  const bool ok = poll_until(timeout_s, [&] {
    int flag = 0;
    MPI_Test(&request, &flag, status);
    return flag != 0;
  });
  if (!ok) throw PeerTimeout(expired(timeout_s, describe ? describe() : std::string("a message from a peer")));
}

void wait_for_peers(int count, MPI_Request* requests, double timeout_s,
                    const std::function<std::string(int)>& describe) {
  if (timeout_s <= 0) {
    MPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
    return;
  }
  // One MPI_Test per request (not MPI_Testall, which modifies no request until all are done), so
  // that at the deadline the completed ones are MPI_REQUEST_NULL and the rest are named.
  const bool ok = poll_until(timeout_s, [&] {
    bool all = true;
    for (int i = 0; i < count; ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
      all = all && flag != 0;
    }
    return all;
  });
  if (ok) return;
  std::ostringstream what;
  int shown = 0;
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    what << (shown++ ? "; " : "") << (describe ? describe(i) : "request " + std::to_string(i));
  }
  throw PeerTimeout(expired(timeout_s, what.str()));
}

}  // namespace minipipe
