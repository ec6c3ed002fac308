// wait_for_peer: MPI_Test polling against a deadline, with a sleep that grows from a few
// microseconds to a millisecond so that short waits stay fast and long ones cost no CPU.
#include "miniapp/mpi/peer_wait.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "miniapp/io/message_text.hpp"
#include "miniapp/io/temp_registry.hpp"

namespace minipipe {

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// `rank` is passed by the watchdog thread, which must not call MPI (MPI_THREAD_SINGLE).
std::string expired(double timeout_s, const std::string& what, int rank = world_rank()) {
  return "rank " + std::to_string(rank) + " waited " + compact_number(timeout_s) + " s for " + what +
         " and gave up (pipeline.timeout = " + compact_number(timeout_s) +
         "); the peer is stopped, hung or far slower; aborting the job";
}

// Calls `done()` until it is true or the deadline passes; false on expiry. The first
// millisecond only yields (a boundary tensor usually lands within it, and a sleep would add its
// own latency to the exposed wait); then sleeps grow to a millisecond so long waits cost no CPU.
template <class Done>
bool poll_until(double timeout_s, Done done) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  const auto spin_until = start + std::chrono::milliseconds(1);
  auto pause = std::chrono::microseconds(20);
  while (!done()) {
    const auto now = clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

// The watchdog behind CollectiveGuard: one detached thread, started by the first guard.
struct Watchdog {
  std::mutex mu;
  std::condition_variable cv;
  bool active = false;
  unsigned long generation = 0;
  std::chrono::steady_clock::time_point deadline;
  double timeout_s = 0;
  std::string what;
  int rank = 0;

  static Watchdog& get() {
    static Watchdog* w = [] {
      auto* d = new Watchdog;  // never destroyed: the thread may outlive static destruction
      d->rank = world_rank();
      std::thread([d] { d->watch(); }).detach();
      return d;
    }();
    return *w;
  }

  void watch() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return active; });
      const unsigned long g = generation;
      if (cv.wait_until(lock, deadline, [&] { return !active || generation != g; })) continue;
      const std::string text =
          "minipipe: error on rank " + std::to_string(rank) + ": " + expired(timeout_s, what, rank) + "\n";
      (void)!::write(2, text.data(), text.size());
      io::remove_registered_temporaries();
      // Give the launcher's output forwarding a moment to carry the line before the exit.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::_Exit(3);
    }
  }
};

}  // namespace

CollectiveGuard::CollectiveGuard(double timeout_s, std::string what) {
  if (timeout_s <= 0) return;
  Watchdog& w = Watchdog::get();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.active = true;
    ++w.generation;
    w.timeout_s = timeout_s;
    w.what = std::move(what);
    w.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(timeout_s));
  }
  w.cv.notify_all();
  armed_ = true;
}

CollectiveGuard::~CollectiveGuard() {
  if (!armed_) return;
  Watchdog& w = Watchdog::get();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.active = false;
    ++w.generation;
  }
  w.cv.notify_all();
}

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
