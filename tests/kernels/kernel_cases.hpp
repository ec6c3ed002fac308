// The kernel-case table of the property tests (test_kernel_properties.cpp): one row per kernel of
// the block says how to make its inputs, how to run it through the real kernel API at a Mode and
// KernelPath, which outputs are gradients of which inputs, and where a property does not apply.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/grad_accum.hpp"
#include "kernels/mode.hpp"
#include "test_util.hpp"

namespace minipipe::test {

// A row's sizes; what each entry means is written in the row (e.g. {S, R, C} for LayerNorm).
using Shape = std::vector<int>;

// One floating-point input: (rows, cols), seeded uniform values in [lo, hi] (lo == hi: constant).
// A differentiable input gets a gradient by finite differences; a seed is the upstream gradient G
// of a forward output (the scalar loss is sum over forward outputs of dot(output, its seed)).
struct InputSpec {
  enum Kind { differentiable, seed };
  std::string name;
  int rows, cols;
  double lo, hi;
  Kind kind;
  std::uint64_t rng_seed;
};

// A row's inputs made at one shape, in the precision T under test.
template <class T>
struct Inputs {
  std::vector<std::string> names;
  std::vector<Tensor<T>> t;
  std::vector<int> ints;  // token ids or targets (-1 = padding), the row's own
  Kokkos::View<int*, Kokkos::LayoutRight, MemSpace> ints_d;

  Tensor<T>& operator()(const std::string& name);
  CIdx idx() const { return CIdx(ints_d.data(), ints_d.extent(0)); }
  CIdx idx(int i0, int n) const { return CIdx(ints_d.data() + i0, n); }
};

// One output as host doubles (exact for float and double); gradients made in deterministic mode
// also carry their exact accumulator words, which the determinism property compares too.
struct Out {
  std::string name;
  std::vector<double> v;
  std::string seed;     // forward output in the loss: the name of its seed input
  std::string grad_of;  // gradient output: the name of the input it is the gradient of
  std::vector<std::uint64_t> exact;
};
using Outs = std::vector<Out>;

// The calls one run makes: (first sample, samples) in call order; `hold` asks a row whose weight
// gradient can hold samples back (Linear) to do so, `by_reference` to hold them as the caller's
// rows instead of copies (a stage's step-wide operand rows).
struct Calls {
  std::vector<std::pair<int, int>> calls;
  bool hold = false;
  bool by_reference = false;
};

template <class T>
using Runner = std::function<Outs(Mode, const Shape&, Inputs<T>&, const Calls&, bool backward)>;
template <class T>
using PathCheck = std::function<void(const Shape&, Inputs<T>&, const Outs& host)>;

// What each property needs from a row. A property that does not apply names its reason here, and
// the test reports the reason when it skips (GTEST_SKIP), never silently.
struct KernelRow {
  std::string name;
  std::function<std::vector<InputSpec>(const Shape&)> inputs;
  std::function<std::vector<int>(const Shape&)> ints;  // may be empty
  std::function<int(const Shape&)> samples;            // samples of a shape (the split axis)
  Runner<float> run_f;
  Runner<double> run_d;

  // Gradient property: finite differences in double at each shape; the forward against a host
  // double reference, and structural checks (exact zeros, exact sums) on the outputs.
  std::vector<Shape> grad_shapes;
  double fd_tol = 1e-6, ref_tol = 1e-12;
  std::function<Outs(const Shape&, Inputs<double>&)> reference;                  // forward outputs
  std::function<void(const Shape&, Inputs<double>&, const Outs&)> exact_checks;  // may be empty

  // Paths property: the device path against the host path bitwise, float and double, at each
  // shape; `path_repeat` calls over the whole batch (a second call adds to the first's sums).
  std::vector<Shape> path_shapes;
  int path_repeat = 1;
  const char* fast_paths_differ = nullptr;  // why fast mode's device path is not bitwise the host's
  PathCheck<float> path_check_f;            // the host path against the canonical order, built here
  PathCheck<double> path_check_d;

  // Fast-mode property: float, fast against deterministic on the same path, every output.
  Shape fast_shape;
  double fast_tol = 0;

  // Determinism property: float, deterministic, every output of the split runs bitwise that of
  // one call; `no_split` says why a kernel has no split axis.
  std::vector<Shape> split_shapes;
  std::vector<Shape> host_split_shapes;  // run on the host path only (edges of host-only code)
  const char* no_split = nullptr;
  bool holds_back = false;          // Linear: every split also with samples held back
  bool fast_split_control = false;  // fast mode's float sums must change with the split (control)
};

const std::vector<KernelRow>& kernel_rows();

// Output helpers for the rows.
template <class T>
Out forward_out(const std::string& name, Tensor<T>& t, const std::string& seed = "") {
  return Out{name, t.host_values(), seed, "", {}};
}
template <class T>
Out grad_out(const std::string& name, Tensor<T>& t, const std::string& of) {
  return Out{name, t.host_values(), "", of, {}};
}
template <class T>
Out grad_out(const std::string& name, const GradAccum<T>& acc, const std::string& of) {
  Tensor<T> g("g", static_cast<int>(acc.size()));
  acc.finalize(g.d);
  Out o{name, g.host_values(), "", of, {}};
  if (acc.mode == Mode::deterministic) {
    auto ex = Kokkos::create_mirror_view(acc.exact());
    Kokkos::deep_copy(ex, acc.exact());
    for (std::size_t i = 0; i < acc.size(); ++i) {
      o.exact.push_back(ex(i).lo);
      o.exact.push_back(static_cast<std::uint64_t>(ex(i).hi));
    }
  }
  return o;
}

template <class T>
Inputs<T> make_inputs(const KernelRow& row, const Shape& s) {
  Inputs<T> in;
  for (const InputSpec& sp : row.inputs(s)) {
    in.names.push_back(sp.name);
    in.t.emplace_back(sp.name.c_str(), sp.rows, sp.cols);
    Tensor<T>& t = in.t.back();
    if (sp.lo == sp.hi) {
      for (std::size_t i = 0; i < t.size(); ++i) t.h(i) = static_cast<T>(sp.lo);
      t.push();
    } else {
      fill_uniform(t, sp.rng_seed, sp.lo, sp.hi);
    }
  }
  if (row.ints) in.ints = row.ints(s);
  in.ints_d = Kokkos::View<int*, Kokkos::LayoutRight, MemSpace>("ints", in.ints.size());
  auto h = Kokkos::create_mirror_view(in.ints_d);
  for (std::size_t i = 0; i < in.ints.size(); ++i) h(i) = in.ints[i];
  Kokkos::deep_copy(in.ints_d, h);
  return in;
}

template <class T>
Tensor<T>& Inputs<T>::operator()(const std::string& name) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return t[i];
  throw std::invalid_argument("kernel case: no input named '" + name + "'");
}

template <class T>
const Runner<T>& runner(const KernelRow& row);
template <>
inline const Runner<float>& runner<float>(const KernelRow& row) {
  return row.run_f;
}
template <>
inline const Runner<double>& runner<double>(const KernelRow& row) {
  return row.run_d;
}

}  // namespace minipipe::test
