// Scratch memory of the kernels (GEMM packing buffers, per-sample partials), owned by the caller
// so that its size shows in the caller's memory figures; no kernel keeps buffers of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "types.hpp"

namespace minipipe {

// A few grow-only MemSpace buffers, one per use. A buffer is reallocated only when a call needs
// more than it holds, so a stage's workspace reaches its size in the first step and the hot path
// allocates nothing after that. One KernelWorkspace serves one caller at a time: two host threads
// calling kernels concurrently need one each.
class KernelWorkspace {
 public:
  enum Slot : int { gemm_a, gemm_b, gemm_c, dw_a, dw_b, dw_partial, dw_row_sums, kSlots };

  KernelWorkspace() = default;
  KernelWorkspace(const KernelWorkspace&) = delete;
  KernelWorkspace& operator=(const KernelWorkspace&) = delete;
  KernelWorkspace(KernelWorkspace&&) = default;
  KernelWorkspace& operator=(KernelWorkspace&&) = default;

  // At least n elements of T in MemSpace for slot s, 64-byte aligned; the contents are undefined.
  template <class T>
  T* get(Slot s, std::size_t n) {
    Buffer& b = buf_[s];
    const std::size_t need = n * sizeof(T) + kAlign;
    if (b.extent(0) < need) {
      b = Buffer();  // free the old buffer before allocating the larger one
      b = Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("KernelWorkspace::") + name(s)), need);
    }
    const auto p = reinterpret_cast<std::uintptr_t>(b.data());
    return reinterpret_cast<T*>((p + kAlign - 1) / kAlign * kAlign);
  }

  // Bytes held by all buffers.
  std::size_t bytes() const {
    std::size_t n = 0;
    for (const Buffer& b : buf_) n += b.extent(0);
    return n;
  }

  // Frees every buffer (they grow again on the next call).
  void release() {
    for (Buffer& b : buf_) b = Buffer();
  }

  static const char* name(Slot s) {
    static const char* const names[kSlots] = {"gemm_a", "gemm_b",     "gemm_c",     "dw_a",
                                              "dw_b",   "dw_partial", "dw_row_sums"};
    return names[s];
  }

 private:
  static constexpr std::size_t kAlign = 64;
  using Buffer = Kokkos::View<unsigned char*, MemSpace>;
  Buffer buf_[kSlots];
};

}  // namespace minipipe
