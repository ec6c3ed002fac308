// The termination handler: only async-signal-safe calls (unlink, write, sigaction, raise), the
// message formatted by hand into a stack buffer.
#include "miniapp/mpi/signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "miniapp/io/temp_registry.hpp"

namespace minipipe {

namespace {

volatile sig_atomic_t g_rank = 0;

// Appends `s` or the decimal `v` to buf at *n (bounded; never allocates).
void put(char* buf, std::size_t cap, std::size_t* n, const char* s) {
  while (*s != '\0' && *n + 1 < cap) buf[(*n)++] = *s++;
}
void put(char* buf, std::size_t cap, std::size_t* n, long v) {
  char digits[24];
  int k = 0;
  const bool neg = v < 0;
  unsigned long u = neg ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
  do {
    digits[k++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && k < 22);
  if (neg) digits[k++] = '-';
  while (k > 0 && *n + 1 < cap) buf[(*n)++] = digits[--k];
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

extern "C" void on_termination(int sig) {
  const int saved_errno = errno;
  const int removed = io::remove_registered_temporaries();
  char msg[160];
  std::size_t n = 0;
  put(msg, sizeof msg, &n, "minipipe: rank ");
  put(msg, sizeof msg, &n, static_cast<long>(g_rank));
  put(msg, sizeof msg, &n, " stopped by ");
  put(msg, sizeof msg, &n, signal_name(sig));
  put(msg, sizeof msg, &n, "; removed ");
  put(msg, sizeof msg, &n, static_cast<long>(removed));
  put(msg, sizeof msg, &n, " temporary file(s)\n");
  ssize_t ignored = ::write(STDERR_FILENO, msg, n);
  (void)ignored;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved_errno;
  ::raise(sig);
}

}  // namespace

void install_termination_handlers(int world_rank) {
  g_rank = world_rank;
  struct sigaction sa {};
  sa.sa_handler = on_termination;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, s);  // one handler run at a time
  sa.sa_flags = 0;
  for (int s : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(s, &sa, nullptr);
}

}  // namespace minipipe
