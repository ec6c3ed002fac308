// SIGINT / SIGTERM / SIGHUP handling of the minipipe driver: the registered temporaries of every
// output being written are removed, the rank says why it stops, and it dies by the same signal.
#pragma once

namespace minipipe {

// Installs the handler (call once, after MPI_Init, with this process's world rank). The handler
// is async-signal-safe: unlink(2) of each registered temporary, one write(2) to stderr, then
// the default action of the signal is restored and the signal raised again, so the launcher
// (mpiexec, a batch system, a shell) sees the process killed by it (exit status 128 + signal).
// mpiexec forwards SIGINT/SIGTERM to every rank, so every rank stops and cleans up.
void install_termination_handlers(int world_rank);

}  // namespace minipipe
