// Temporaries that exist right now (output files being written), kept in a fixed table that a
// signal handler can walk: on SIGINT/SIGTERM every registered temporary is unlinked.
#pragma once

#include <cstddef>
#include <string>

namespace minipipe::io {

// Remembers `path` until unregister_temporary(slot). Returns the slot, or -1 when the table is
// full or the path is too long for it (the file is then still removed by the normal error paths,
// only not by a signal handler).
int register_temporary(const std::string& path) noexcept;
void unregister_temporary(int slot) noexcept;

// Async-signal-safe: unlinks every registered temporary (unlink(2) only, no allocation, no
// locks). Returns how many were unlinked.
int remove_registered_temporaries() noexcept;

// Number of registered temporaries (for tests and diagnostics).
std::size_t registered_temporary_count() noexcept;

}  // namespace minipipe::io
