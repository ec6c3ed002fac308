// Gradient accumulator of one parameter tensor across the micro-batches of a step.
// deterministic: exact 128-bit fixed point (order-independent); fast: a plain running sum.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "exact_sum.hpp"
#include "finite_check.hpp"

namespace minipipe {

// The device-side half of a GradAccum: views only, so kernels on any backend can capture it
// by value (GradAccum itself holds a std::string, which device code must not copy).
struct ExactTarget {
  ExactView exact;
  FlagView overflow;
  // Every accumulator is zero (nothing added since GradAccum::zero): a kernel that writes each
  // element once may store its exact sum instead of reading the zeros back (gemm_det_exact's
  // first fold). False is always safe.
  bool known_zero = false;
  // The zeros are not even written yet (GradAccum::exact_target_overwrite): the kernel must store
  // every element before any is read, zeros included where it has nothing to add. Implies known_zero.
  bool unfilled = false;
  // Where a kernel that forms each element's whole sum may also store it as a float, as finalize
  // would (gemm_det_exact); null: nowhere. GradAccum::floats_stored() records that it did.
  float* final_floats = nullptr;
  // With final_floats: nothing will read the sums' words (GradAccum::words_unread), so a kernel that
  // stores the floats may leave the words unwritten (gemm_det_exact's one fold: 16 bytes an element
  // written to memory that nothing reads).
  bool floats_only = false;
  // Adds one sample's partial gradient value v to element e. Called inside kernels where the
  // calling thread owns element e (no two threads touch the same e concurrently).
  KOKKOS_INLINE_FUNCTION void add(std::size_t e, double v) const {
    int ov = 0;
    ExactSum::add(exact(e), v, ov);
    if (ov) overflow() = 1;
  }
};

// An exact accumulator overflowed: a per-sample partial or the running sum left the fixed-point
// range or was not finite (the message names the parameter).
struct GradientOverflow : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Per-sample operands of deterministic backward-weight calls that Linear holds back when deferral
// is on (GradAccum::defer_weight_samples), so that the samples of several micro-batches go through
// one gemm_det_exact call: one fold into the 16-byte accumulators per group of samples instead of
// one per micro-batch. The exact sum is order-free, so holding samples back changes no bit.
// By reference (defer_weight_samples(true, true)): the owner keeps every call's x and dy rows
// valid and unchanged until the flush and gives consecutive calls consecutive rows of one buffer
// (a stage's step-wide operand rows), so nothing is copied: the held samples are the rows from
// ref_x / ref_dy on, and a call that does not continue them adds those held first. Fast mode's
// Linear holds only by reference (one GEMM over all held rows at the flush).
template <class T>
struct GradAccum;
template <class T>
struct PendingSamples {
  bool enabled = false;
  bool reference = false;
  View1<T> x, dy;    // (capacity*rows, in) and (capacity*rows, out): held samples in call order
  int capacity = 0;  // samples held at most (set on first use from rows)
  int count = 0;     // samples held now
  int rows = 0, in = 0, out = 0;
  const T* ref_x = nullptr;  // by reference: the first held sample's rows, ld_x / ld_dy apart
  const T* ref_dy = nullptr;
  std::ptrdiff_t ld_x = 0, ld_dy = 0;
  GradAccum<T>* bias = nullptr;  // by reference: the bias accumulator of the held calls (or none)
};

template <class T>
struct GradAccum {
  Mode mode = Mode::deterministic;
  std::string name;  // global parameter name, for error messages
  View1<T> sum;      // fast mode, one per element
  FlagView overflow;
  PendingSamples<T> pending;  // Linear weights with deferral on; else unused
  // Deterministic mode's accumulators, one per element. zero_values() only notes that they are
  // zero; exact() writes the zeros when first asked, so a step whose first kernel stores every
  // accumulator (exact_target_overwrite) never writes them (100 MB a step on the e2e deck).
  const ExactView& exact() const {
    if (words_missing) throw_words_missing();
    floats_ready = false;  // the caller may change the words
    if (fill_pending) {
      Kokkos::deep_copy(ExecSpace(), exact_words, Fixed128{});
      fill_pending = false;
    }
    return exact_words;
  }

  // The exact accumulators are zero: set by zero_values(), cleared when exact_target() hands them
  // to a kernel (every kernel that adds gets them that way) or by mark_written() after a direct
  // write (the data-parallel all-reduce's unpack).
  mutable bool exact_zero = false;

  GradAccum() = default;
  GradAccum(const std::string& param_name, std::size_t n, Mode m)
      : GradAccum(param_name, n, m, FlagView("grad_overflow::" + param_name)) {}
  // With a flag that lives in a caller's array of flags (a stage's), so the caller clears and
  // reads every parameter's flag with one copy per step (zero_values / finalize_unchecked).
  GradAccum(const std::string& param_name, std::size_t n, Mode m, const FlagView& flag)
      : mode(m), name(param_name), overflow(flag) {
    if (mode == Mode::deterministic)
      exact_words = ExactView("grad_exact::" + name, n);
    else
      sum = View1<T>("grad_sum::" + name, n);
  }

  // Lets Linear::backward_weight hold samples back until Linear::flush_weight (or until a group
  // is full); the owner must flush before the accumulator is read (finalize checks it).
  // by_reference: see PendingSamples (the caller's rows are held, not copies).
  void defer_weight_samples(bool on, bool by_reference = false) {
    pending.enabled = on;
    pending.reference = on && by_reference;
  }

  std::size_t size() const { return mode == Mode::deterministic ? exact_words.extent(0) : sum.extent(0); }

  // Fills on ExecSpace: ordered with the kernels that follow, no host wait.
  void zero() {
    Kokkos::deep_copy(ExecSpace(), overflow, 0);
    zero_values();
  }
  // The accumulated values only; the owner of a shared flag array clears the flags itself.
  void zero_values() {
    pending.count = 0;
    if (mode == Mode::deterministic) {
      fill_pending = true;  // written by exact() or by the first kernel (exact_target_overwrite)
      exact_zero = true;
      floats_ready = false;
      words_missing = floats_only = false;
      unread_samples = 0;
    } else {
      Kokkos::deep_copy(ExecSpace(), sum, T(0));
    }
  }

  // What deterministic-mode kernels capture to add per-sample partials exactly. After this call
  // the accumulators are no longer known to be zero (the caller may add to them).
  ExactTarget exact_target() const {
    const ExactTarget t{exact(), overflow, exact_zero, false, nullptr};
    exact_zero = false;
    return t;
  }
  // The same for a kernel that, given known_zero, stores every element before it reads any
  // (gemm_det_exact on the host): the zeros zero_values() deferred are left to it (unfilled).
  // With a final view (finalize_into) and the accumulators known to be zero, the target also asks
  // for the floats there; the caller says floats_stored() if the kernel stored them.
  // With words_unread, that kernel may store the floats alone (then exact() is an error until zero):
  // any call, or with words_unread(samples) only a call that adds all `samples` (call_samples).
  ExactTarget exact_target_overwrite(int call_samples = 0) const {
    if (words_missing) throw_words_missing();
    float* const floats = exact_zero && final_view.extent(0) == exact_words.extent(0) ? final_view.data() : nullptr;
    const bool whole = floats_only && (unread_samples == 0 || call_samples == unread_samples);
    const ExactTarget t{exact_words, overflow, exact_zero, fill_pending, floats, floats && whole};
    call_floats_only = t.floats_only;
    exact_zero = false;
    fill_pending = false;
    floats_ready = false;
    return t;
  }
  void mark_written() const {
    exact_zero = false;
    floats_ready = false;
  }
  // The gradient finalize writes into (the owner's) when the kernel that forms the whole sum stores
  // it directly (ExactTarget::final_floats); finalize into that view then converts nothing.
  void finalize_into(const View1<T>& g) {
    if constexpr (std::is_same<T, float>::value) final_view = g;
  }
  void floats_stored() const {
    floats_ready = true;
    words_missing = call_floats_only;  // the kernel was allowed to leave them unwritten
  }
  // The owner's promise until the next zero_values(): nothing but finalize reads this step's sum
  // (no data-parallel all-reduce, no sum of model copies), and either one kernel forms it (one call
  // with every sample: samples = 0) or the step adds `samples` samples in all (samples > 0), where
  // only a call that adds all of them to zero accumulators forms the whole sum. The exact GEMM then
  // writes the gradient's floats and not its words.
  void words_unread(int samples = 0) {
    if (mode != Mode::deterministic) return;
    floats_only = true;
    unread_samples = samples;
  }

  // Writes the accumulated gradient into g (length size()) and returns g's first non-finite
  // element: fast mode's float sum can overflow and is checked in the same pass; the exact sum is
  // range-checked (the overflow flag) and always finite. Throws if the exact accumulator
  // overflowed, naming the parameter.
  NonFinite finalize(const View1<T>& g) const {
    int ov = 0;
    blocking_copy(ov, overflow);
    if (ov) throw_overflow();
    return finalize_unchecked(g);
  }
  [[noreturn]] void throw_words_missing() const {
    throw std::logic_error("gradient accumulator '" + name +
                           "': its exact sums were asked for after a kernel stored only their floats "
                           "(words_unread promised that one call forms the step's sum and nothing else reads it)");
  }
  [[noreturn]] void throw_overflow() const {
    throw GradientOverflow("gradient accumulator overflow in parameter '" + name +
                           "': a per-sample partial or the running sum exceeded the exact "
                           "fixed-point range (|x| < 2^47) or was not finite");
  }
  // finalize without reading the flag back: for a caller that has read it already. With `into`,
  // fast mode's check leaves its code in device memory (see checked_for_each) and returns empty.
  NonFinite finalize_unchecked(const View1<T>& g, const CodeSlot* into = nullptr) const {
    if (pending.count > 0)
      throw std::logic_error("gradient accumulator '" + name + "' read with " + std::to_string(pending.count) +
                             " held-back sample(s) not flushed (Linear::flush_weight)");
    const std::int64_t n = static_cast<std::int64_t>(g.extent(0));
    if (mode == Mode::deterministic) {
      if (floats_ready && static_cast<const void*>(g.data()) == static_cast<const void*>(final_view.data()))
        return NonFinite{};  // the exact GEMM stored these floats with the sums
      // No check needed: a sum that left the exact range (|x| < 2^47) or took a non-finite partial
      // raised the overflow flag instead, and every value in range is finite as a T. (A fused
      // check made this kernel 3x slower on the host: it stops the conversion vectorizing.)
      auto ex = exact();
      Kokkos::parallel_for(
          "GradAccum::finalize", Kokkos::RangePolicy<ExecSpace>(0, n),
          KOKKOS_LAMBDA(const std::int64_t e) { g(e) = static_cast<T>(ExactSum::to_double(ex(e))); });
      return NonFinite{};
    }
    const T* const s = sum.data();
    T* const gp = g.data();
    return checked_for_each<T>(
        "GradAccum::finalize", g,
        KOKKOS_LAMBDA(const std::int64_t e) {
          const T v = s[e];
          gp[e] = v;
          return v;
        },
        into);
  }

 private:
  ExactView exact_words;
  mutable bool fill_pending = false;      // zero_values() ran and the zeros are not written yet
  View1<float> final_view;                // finalize_into's view (float only)
  mutable bool floats_ready = false;      // final_view holds every sum's float, the words unchanged since
  bool floats_only = false;               // words_unread() this step
  int unread_samples = 0;                 // its sample count (0: one call with every sample)
  mutable bool call_floats_only = false;  // the last exact_target_overwrite's floats_only
  mutable bool words_missing = false;     // the floats were stored without the words
};

}  // namespace minipipe
