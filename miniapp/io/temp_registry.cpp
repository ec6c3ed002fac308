// The table behind register_temporary: fixed slots of atomic state plus a path buffer, so that
// the signal handler touches only lock-free atomics and unlink(2).
#include "miniapp/io/temp_registry.hpp"

#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>

namespace minipipe::io {

namespace {

// A run has a handful of outputs open at once (one dump, or one small text file); 64 is ample.
constexpr int kSlots = 64;

enum SlotState : int { kFree = 0, kFilling = 1, kLive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};

Slot g_slots[kSlots];

static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need lock-free atomics");

}  // namespace

int register_temporary(const std::string& path) noexcept {
  if (path.empty() || path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
    g_slots[i].state.store(kLive, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_temporary(int slot) noexcept {
  if (slot < 0 || slot >= kSlots) return;
  g_slots[slot].state.store(kFree, std::memory_order_release);
}

int remove_registered_temporaries() noexcept {
  int removed = 0;
  for (auto& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != kLive) continue;
    if (::unlink(s.path) == 0) ++removed;
  }
  return removed;
}

std::size_t registered_temporary_count() noexcept {
  std::size_t n = 0;
  for (const auto& s : g_slots) n += s.state.load(std::memory_order_acquire) == kLive ? 1 : 0;
  return n;
}

}  // namespace minipipe::io
