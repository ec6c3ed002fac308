// Bounded waits for a peer rank (pipeline.timeout): a request is polled until it completes or
// its deadline passes, and an expired wait names the action and the peer it was waiting on.
#pragma once

#include <mpi.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace minipipe {

// A wait for a peer ran past pipeline.timeout. The message names the rank, what it waited for
// (from the caller's description), the peer, and the timeout; it is a failure during the run:
// the driver prints it and aborts the job (exit code 3).
struct PeerTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Completes `request` like MPI_Wait. With timeout_s > 0, polls MPI_Test (yielding the CPU
// between polls, so an oversubscribed peer can run) and throws PeerTimeout once timeout_s
// seconds have passed; the request is then still pending (the job is about to be aborted, and
// the caller may MPI_Cancel it). timeout_s == 0 waits forever (MPI_Wait). `describe` is called
// only on expiry and says what is awaited, e.g. "the activation of micro-batch 3 (action 1F3)
// from rank 0".
void wait_for_peer(MPI_Request& request, double timeout_s, const std::function<std::string()>& describe,
                   MPI_Status* status = MPI_STATUS_IGNORE);

// Bounds a blocking call that cannot be polled (an MPI collective, an HDF5 collective call):
// when the guarded section outlives timeout_s, a watchdog thread prints "rank R waited T s for
// <what> ...", removes the run's temporary files and ends the process with exit code 3, and the
// launcher then stops the job. timeout_s <= 0: no bound. One guard at a time per process.
class CollectiveGuard {
 public:
  CollectiveGuard(double timeout_s, std::string what);
  ~CollectiveGuard();
  CollectiveGuard(const CollectiveGuard&) = delete;
  CollectiveGuard& operator=(const CollectiveGuard&) = delete;

 private:
  bool armed_ = false;
};

// The same for several requests at once (MPI_Waitall); `describe(i)` names request i, and the
// message lists every request still pending at the deadline.
void wait_for_peers(int count, MPI_Request* requests, double timeout_s,
                    const std::function<std::string(int)>& describe);

}  // namespace minipipe
