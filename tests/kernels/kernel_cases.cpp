// The rows of the kernel-case table: one adapter per kernel of the block that makes its inputs,
// runs it through the real kernel API and names its outputs; test_kernel_properties.cpp holds
// every row to the four properties. A new kernel adds its adapter here and its line in kernel_rows().
#include "kernel_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/attention_order.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/detmath.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"

namespace minipipe::test {
namespace {

using D = InputSpec;

int product(const Shape& s, int a, int b) {
  return s[a] * s[b];
}

// The canonical row order written out independently (docs/design.md §4 rule 1): lane l sums
// c = l, l+32, ... in order, then the pairwise tree over lanes (w = 16, 8, 4, 2, 1).
template <class T>
T canonical_sum(const std::vector<T>& v) {
  T p[32] = {};
  for (std::size_t c = 0; c < v.size(); ++c) p[c % 32] = p[c % 32] + v[c];
  for (int w = 16; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) p[l] = p[l] + p[l + w];
  return p[0];
}

const Out& find(const Outs& o, const std::string& name) {
  for (const Out& x : o)
    if (x.name == name) return x;
  throw std::invalid_argument("kernel case: no output named '" + name + "'");
}

// ---- LayerNorm: shape {S samples, R rows a sample, C} ------------------------------------------
struct LayerNormCase {
  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls& calls, bool backward) {
    const int R = s[1], C = s[2], N = s[0] * R;
    Tensor<T>&x = in("x"), &w = in("w"), &b = in("b"), &G = in("G");
    Tensor<T> out("out", N, C), mean("mean", N), rstd("rstd", N), dx("dx", N, C);
    GradAccum<T> dw("ln_w", C, mode), db("ln_b", C, mode);
    dw.zero();
    db.zero();
    for (auto [s0, k] : calls.calls) {
      const int r0 = s0 * R, nr = k * R;
      LayerNorm<T>::forward(mode, x.rows_cmat(r0, nr), w.cvec(), b.cvec(), out.rows_mat(r0, nr), mean.slice_mut(r0, nr),
                            rstd.slice_mut(r0, nr));
      if (!backward) continue;
      LayerNorm<T>::backward_input(mode, x.rows_cmat(r0, nr), w.cvec(), mean.slice(r0, nr), rstd.slice(r0, nr),
                                   G.rows_cmat(r0, nr), dx.rows_mat(r0, nr));
      LayerNorm<T>::backward_weight(mode, x.rows_cmat(r0, nr), mean.slice(r0, nr), rstd.slice(r0, nr),
                                    G.rows_cmat(r0, nr), R, dw, db);
    }
    Outs o = {forward_out("out", out, "G"), forward_out("mean", mean), forward_out("rstd", rstd)};
    if (backward)
      for (Out g : {grad_out("dx", dx, "x"), grad_out("dw", dw, "w"), grad_out("db", db, "b")}) o.push_back(g);
    return o;
  }

  // The mean is the canonical sum / C, computed here without the kernels' helper.
  template <class T>
  static void path_check(const Shape& s, Inputs<T>& in, const Outs& host) {
    const int N = product(s, 0, 1), C = s[2];
    const Out& mean = find(host, "mean");
    Tensor<T>& x = in("x");
    x.pull();
    for (int n = 0; n < N; ++n) {
      std::vector<T> row(C);
      for (int c = 0; c < C; ++c) row[c] = x.h(std::size_t(n) * C + c);
      const T m = canonical_sum(row) / static_cast<T>(C);
      EXPECT_EQ(static_cast<double>(m), mean.v[n]) << "LayerNorm mean, row " << n;
    }
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "LayerNorm";
    r.inputs = [](const Shape& s) {
      const int N = product(s, 0, 1), C = s[2];
      return std::vector<InputSpec>{{"x", N, C, -3.0, 3.0, D::differentiable, 21},
                                    {"w", C, 1, 0.5, 1.5, D::differentiable, 22},
                                    {"b", C, 1, -1.0, 1.0, D::differentiable, 23},
                                    {"G", N, C, -1.0, 1.0, D::seed, 24}};
    };
    r.samples = [](const Shape& s) { return s[0]; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{2, 3, 8}};
    r.reference = [](const Shape& s, Inputs<double>& in) {  // two passes on the host
      const int N = product(s, 0, 1), C = s[2];
      Tensor<double>&x = in("x"), &w = in("w"), &b = in("b");
      x.pull();
      w.pull();
      b.pull();
      std::vector<double> ref(std::size_t(N) * C);
      for (int n = 0; n < N; ++n) {
        double m = 0, v = 0;
        for (int c = 0; c < C; ++c) m += x.h(n * C + c) / C;
        for (int c = 0; c < C; ++c) v += (x.h(n * C + c) - m) * (x.h(n * C + c) - m) / C;
        for (int c = 0; c < C; ++c) ref[n * C + c] = (x.h(n * C + c) - m) / std::sqrt(v + 1e-5) * w.h(c) + b.h(c);
      }
      return Outs{{"out", ref, "", "", {}}};
    };
    // The weight gradient's device teams take 32 channels and 8 samples a pass, so C and S fall one
    // below, at and one above those; S = 20 makes passes of 8, 8 and 4, where a GPU team's later
    // threads refill the partials that the first 32 still read unless the pass ends with a barrier.
    r.path_shapes = {{1, 1, 1},   {3, 1, 5},  {2, 2, 31}, {2, 3, 32}, {1, 5, 33}, {2, 4, 100},
                     {1, 3, 768}, {8, 2, 64}, {9, 2, 65}, {7, 1, 63}, {20, 2, 33}};
    r.fast_paths_differ =
        "fast mode's device path sums a row in team order, its host path in the canonical lanes: the fast-mode "
        "property holds both paths to deterministic mode within tolerance instead";
    r.path_check_f = path_check<float>;
    r.path_check_d = path_check<double>;
    // Measured 2.7e-7 (rstd, device path) on x86-64, Serial; a margin of about 8x for other backends.
    r.fast_shape = {4, 16, 96};
    r.fast_tol = 2.5e-6;
    r.split_shapes = {{6, 4, 16}};
    r.fast_split_control = true;
    return r;
  }
};

// ---- GELU: shape {n} ---------------------------------------------------------------------------
struct GeluCase {
  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls&, bool backward) {
    Tensor<T>&x = in("x"), &G = in("G");
    Tensor<T> y("y", s[0]), dx("dx", s[0]);
    Gelu<T>::forward(mode, x.cvec(), y.vec());
    Outs o = {forward_out("y", y, "G")};
    if (backward) {
      Gelu<T>::backward_input(mode, x.cvec(), G.cvec(), dx.vec());
      o.push_back(grad_out("dx", dx, "x"));
    }
    return o;
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "Gelu";
    r.inputs = [](const Shape& s) {
      return std::vector<InputSpec>{{"x", s[0], 1, -6.0, 6.0, D::differentiable, 37},
                                    {"G", s[0], 1, -1.0, 1.0, D::seed, 38}};
    };
    r.samples = [](const Shape&) { return 1; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{64}};
    r.reference = [](const Shape& s, Inputs<double>& in) {
      Tensor<double>& x = in("x");
      x.pull();
      std::vector<double> ref(s[0]);
      const double k = std::sqrt(2.0 / M_PI);
      for (int i = 0; i < s[0]; ++i)
        ref[i] = 0.5 * x.h(i) * (1.0 + std::tanh(k * (x.h(i) + 0.044715 * std::pow(x.h(i), 3))));
      return Outs{{"y", ref, "", "", {}}};
    };
    // One kernel serves both paths today (no use_device_path branch): the property keeps it so.
    r.path_shapes = {{1}, {255}, {257}, {4096}};
    // One formula serves both modes today (kernels/gelu.cpp), so fast mode measures 0; the tolerance
    // is the one a fast form of its own was held to.
    r.fast_shape = {4096};
    r.fast_tol = 1.3e-6;
    r.no_split = "elementwise: no sum across elements or samples that a split could reorder";
    return r;
  }
};

// ---- attention: shape {B, T, C, H} -------------------------------------------------------------
struct AttentionCase {
  // Every output starts as garbage (each path must overwrite all it returns). The host path writes
  // zeros above att's diagonal (exact_checks holds it to that); the device path does not write them,
  // so they read back as 0 here.
  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls& calls, bool backward) {
    const int T_ = s[1], C = s[2], H = s[3], N = s[0] * T_;
    Tensor<T>&qkv = in("qkv"), &G = in("G");
    Tensor<T> att("att", s[0] * H * T_, T_), out("out", N, C), dqkv("dqkv", N, 3 * C);
    fill_uniform(att, 73, -9.0, 9.0);
    fill_uniform(out, 75, -9.0, 9.0);
    fill_uniform(dqkv, 77, -9.0, 9.0);
    for (auto [s0, k] : calls.calls) {
      const int r0 = s0 * T_, nr = k * T_;
      Mat<T> a(att.d.data() + std::size_t(s0) * H * T_ * T_, std::size_t(k) * H * T_, T_);
      Attention<T>::forward(mode, k, T_, C, H, qkv.rows_cmat(r0, nr), a, out.rows_mat(r0, nr));
      if (backward)
        Attention<T>::backward_input(mode, k, T_, C, H, qkv.rows_cmat(r0, nr), a, G.rows_cmat(r0, nr),
                                     dqkv.rows_mat(r0, nr));
    }
    Out a = forward_out("att", att);
    if (use_device_path())
      for (std::size_t r = 0; r < std::size_t(s[0]) * H * T_; ++r)
        for (int t2 = static_cast<int>(r % T_) + 1; t2 < T_; ++t2) a.v[r * T_ + t2] = 0;
    Outs o = {a, forward_out("out", out, "G")};
    if (backward) o.push_back(grad_out("dqkv", dqkv, "qkv"));
    return o;
  }

  // The host path against the canonical order's plain loops (attention_order.hpp).
  template <class T>
  static void path_check(const Shape& s, Inputs<T>& in, const Outs& host) {
    const int B = s[0], T_ = s[1], C = s[2], H = s[3], N = B * T_;
    Tensor<T> att_o("ao", B * H * T_, T_), out_o("oo", N, C), dqkv_o("go", N, 3 * C), att_h("ah", B * H * T_, T_);
    const Out& att = find(host, "att");
    for (std::size_t i = 0; i < att_h.size(); ++i) att_h.h(i) = static_cast<T>(att.v[i]);
    att_h.push();
    attention_order::forward<T>("test::order::", B, T_, C, H, in("qkv").cmat(), att_o.mat(), out_o.mat());
    attention_order::backward_input<T>("test::order::", B, T_, C, H, in("qkv").cmat(), att_h.cmat(), in("G").cmat(),
                                       dqkv_o.mat());
    fence("test::attention_order");
    Out ao = forward_out("att", att_o);
    for (std::size_t r = 0; r < std::size_t(B) * H * T_; ++r)
      for (int t2 = static_cast<int>(r % T_) + 1; t2 < T_; ++t2) ao.v[r * T_ + t2] = 0;
    EXPECT_TRUE(ao.v == att.v) << "att: host path against attention_order";
    EXPECT_TRUE(out_o.host_values() == find(host, "out").v) << "out: host path against attention_order";
    EXPECT_TRUE(dqkv_o.host_values() == find(host, "dqkv").v) << "dqkv: host path against attention_order";
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "Attention";
    r.inputs = [](const Shape& s) {
      const int N = product(s, 0, 1), C = s[2];
      return std::vector<InputSpec>{{"qkv", N, 3 * C, -2.0, 2.0, D::differentiable, 71},
                                    {"G", N, C, -1.0, 1.0, D::seed, 72}};
    };
    r.samples = [](const Shape& s) { return s[0]; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{2, 5, 8, 2}};
    r.reference = [](const Shape& s, Inputs<double>& in) {  // naive, with std::exp
      const int B = s[0], T_ = s[1], C = s[2], H = s[3], hs = C / H, N = B * T_;
      Tensor<double>& qkv = in("qkv");
      qkv.pull();
      std::vector<double> ref(std::size_t(N) * C, 0.0), att_ref(std::size_t(B) * H * T_ * T_, 0.0);
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
          for (int t = 0; t < T_; ++t) {
            std::vector<double> p(t + 1);
            double mx = -1e300, sum = 0;
            for (int t2 = 0; t2 <= t; ++t2) {
              double d = 0;
              for (int i = 0; i < hs; ++i)
                d += qkv.h((b * T_ + t) * 3 * C + h * hs + i) * qkv.h((b * T_ + t2) * 3 * C + C + h * hs + i);
              p[t2] = d / std::sqrt(double(hs));
              mx = std::max(mx, p[t2]);
            }
            for (auto& v : p) sum += (v = std::exp(v - mx));
            for (int t2 = 0; t2 <= t; ++t2) att_ref[((b * H + h) * T_ + t) * T_ + t2] = p[t2] / sum;
            for (int i = 0; i < hs; ++i)
              for (int t2 = 0; t2 <= t; ++t2)
                ref[(b * T_ + t) * C + h * hs + i] += p[t2] / sum * qkv.h((b * T_ + t2) * 3 * C + 2 * C + h * hs + i);
          }
      return Outs{{"out", ref, "", "", {}}, {"att", att_ref, "", "", {}}};
    };
    r.exact_checks = [](const Shape& s, Inputs<double>&, const Outs& o) {
      if (use_device_path()) return;  // see run
      const int T_ = s[1];
      const Out& att = find(o, "att");
      for (std::size_t r = 0; r < att.v.size() / T_; ++r)
        for (int t2 = static_cast<int>(r % T_) + 1; t2 < T_; ++t2)
          EXPECT_EQ(att.v[r * T_ + t2], 0.0) << "masked entry not zero, row " << r;
    };
    // T = 520: more keys than the host kernel's 16 KB score buffer holds (512 float, 256 double with
    // AVX-512), so it forms the scores in att itself and zeros the masked tail there.
    r.path_shapes = {{1, 1, 4, 1},    {2, 5, 12, 3},   {1, 33, 32, 2}, {2, 70, 64, 2},
                     {1, 129, 16, 1}, {1, 40, 130, 1}, {1, 520, 16, 1}};
    r.path_check_f = path_check<float>;
    r.path_check_d = path_check<double>;
    r.fast_paths_differ =
        "fast mode's AVX-512 host forward uses its own shorter exp and multiplies by 1/sum; the device path "
        "keeps det::exp: the fast-mode property holds both paths to deterministic mode within tolerance instead";
    r.fast_shape = {2, 24, 32, 4};
    r.fast_tol = 5e-7;  // the host's fast exp: measured 6e-8 (att, out) on x86-64 with AVX-512
    r.split_shapes = {{6, 5, 8, 2}};
    return r;
  }
};

// ---- cross-entropy: shape {S, T, V}; every third row is padding (target -1) ---------------------
struct CrossEntropyCase {
  static std::vector<int> targets(const Shape& s) {
    std::vector<int> tg(std::size_t(s[0]) * s[1]);
    for (std::size_t n = 0; n < tg.size(); ++n) tg[n] = n % 3 == 2 ? -1 : static_cast<int>((n * 5 + 3) % s[2]);
    return tg;
  }
  // The loss is the sum of the valid rows' losses over their count (docs/design.md §2): that is the
  // seed of `losses` and the scale of the backward.
  static double scale(const Shape& s) {
    const auto tg = targets(s);
    return 1.0 / static_cast<double>(std::count_if(tg.begin(), tg.end(), [](int t) { return t >= 0; }));
  }

  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls& calls, bool backward) {
    const int T_ = s[1], V = s[2], N = s[0] * T_;
    Tensor<T>& logits = in("logits");
    Tensor<T> losses("losses", N), dlogits("dlogits", N, V);
    for (auto [s0, k] : calls.calls) {
      const int r0 = s0 * T_, nr = k * T_;
      CrossEntropy<T>::forward(mode, logits.rows_cmat(r0, nr), in.idx(r0, nr), losses.slice_mut(r0, nr));
      if (backward)
        CrossEntropy<T>::backward_input(mode, logits.rows_cmat(r0, nr), in.idx(r0, nr), static_cast<T>(scale(s)),
                                        dlogits.rows_mat(r0, nr));
    }
    Outs o = {forward_out("losses", losses, "scale")};
    if (backward) o.push_back(grad_out("dlogits", dlogits, "logits"));
    return o;
  }

  // The host path's loss against the canonical order: the sum of exp(logit - max) in the tree.
  template <class T>
  static void path_check(const Shape& s, Inputs<T>& in, const Outs& host) {
    const int N = product(s, 0, 1), V = s[2];
    Tensor<T>& logits = in("logits");
    logits.pull();
    const Out& loss = find(host, "losses");
    for (int n = 0; n < N; ++n) {
      if (in.ints[n] < 0) continue;
      T mx = logits.h(std::size_t(n) * V);
      for (int v = 1; v < V; ++v) mx = std::max(mx, logits.h(std::size_t(n) * V + v));
      std::vector<T> e(V);
      for (int v = 0; v < V; ++v) e[v] = det::exp(logits.h(std::size_t(n) * V + v) - mx);
      const T ref = det::log(canonical_sum(e)) - (logits.h(std::size_t(n) * V + in.ints[n]) - mx);
      EXPECT_EQ(static_cast<double>(ref), loss.v[n]) << "CrossEntropy loss, row " << n;
    }
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "CrossEntropy";
    r.inputs = [](const Shape& s) {
      const int N = product(s, 0, 1);
      return std::vector<InputSpec>{{"logits", N, s[2], -8.0, 8.0, D::differentiable, 39},
                                    {"scale", N, 1, scale(s), scale(s), D::seed, 0}};
    };
    r.ints = targets;
    r.samples = [](const Shape& s) { return s[0]; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{2, 4, 7}};
    r.reference = [](const Shape& s, Inputs<double>& in) {
      const int N = product(s, 0, 1), V = s[2];
      Tensor<double>& logits = in("logits");
      logits.pull();
      std::vector<double> ref(N, 0.0);
      for (int n = 0; n < N; ++n) {
        if (in.ints[n] < 0) continue;
        double sum = 0;
        for (int v = 0; v < V; ++v) sum += std::exp(logits.h(n * V + v));
        ref[n] = std::log(sum) - logits.h(n * V + in.ints[n]);
      }
      return Outs{{"losses", ref, "", "", {}}};
    };
    r.exact_checks = [](const Shape& s, Inputs<double>& in, const Outs& o) {  // padding rows: exactly zero
      const int V = s[2];
      const Out &loss = find(o, "losses"), &dl = find(o, "dlogits");
      for (std::size_t n = 0; n < in.ints.size(); ++n)
        if (in.ints[n] < 0) {
          EXPECT_EQ(loss.v[n], 0.0) << "padding row " << n;
          for (int v = 0; v < V; ++v) EXPECT_EQ(dl.v[n * V + v], 0.0) << "padding row " << n;
        }
    };
    r.path_shapes = {{1, 1, 1}, {4, 1, 3}, {6, 1, 31}, {5, 1, 32}, {7, 1, 33}, {4, 1, 100}, {3, 1, 1027}};
    r.fast_paths_differ =
        "fast mode's device path sums exp in team order, its host path in the canonical lanes: the fast-mode "
        "property holds both paths to deterministic mode within tolerance instead";
    r.path_check_f = path_check<float>;
    r.path_check_d = path_check<double>;
    // Measured 1.0e-7 (losses, device path: its fast sums run in team order, about an ulp apart).
    r.fast_shape = {4, 10, 300};
    r.fast_tol = 5e-7;
    r.split_shapes = {{6, 5, 11}};
    return r;
  }
};

// ---- embedding: shape {B, T, V, C, Tmax}; tokens repeat within and across samples ---------------
struct EmbeddingCase {
  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls& calls, bool backward) {
    const int T_ = s[1], V = s[2], C = s[3], Tmax = s[4], N = s[0] * T_;
    Tensor<T>&wte = in("wte"), &wpe = in("wpe"), &G = in("G");
    Tensor<T> out("out", N, C);
    GradAccum<T> dwte("wte", std::size_t(V) * C, mode), dwpe("wpe", std::size_t(Tmax) * C, mode);
    dwte.zero();
    dwpe.zero();
    for (auto [s0, k] : calls.calls) {
      const int r0 = s0 * T_, nr = k * T_;
      Embedding<T>::forward(k, T_, in.idx(r0, nr), wte.cmat(), wpe.cmat(), out.rows_mat(r0, nr));
      if (backward) Embedding<T>::backward_weight(mode, k, T_, in.idx(r0, nr), G.rows_cmat(r0, nr), dwte, dwpe);
    }
    Outs o = {forward_out("out", out, "G")};
    if (backward)
      for (Out g : {grad_out("dwte", dwte, "wte"), grad_out("dwpe", dwpe, "wpe")}) o.push_back(g);
    return o;
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "Embedding";
    r.inputs = [](const Shape& s) {
      const int N = product(s, 0, 1), V = s[2], C = s[3], Tmax = s[4];
      return std::vector<InputSpec>{{"wte", V, C, -1.0, 1.0, D::differentiable, 10},
                                    {"wpe", Tmax, C, -1.0, 1.0, D::differentiable, 11},
                                    {"G", N, C, -1.0, 1.0, D::seed, 12}};
    };
    r.ints = [](const Shape& s) {
      std::vector<int> tok(std::size_t(s[0]) * s[1]);
      for (std::size_t n = 0; n < tok.size(); ++n) tok[n] = static_cast<int>((n * 7 + n / 3) % s[2]);
      return tok;
    };
    r.samples = [](const Shape& s) { return s[0]; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{2, 4, 5, 3, 6}};  // Tmax > T: positions never used
    r.reference = [](const Shape& s, Inputs<double>& in) {
      const int N = product(s, 0, 1), T_ = s[1], C = s[3];
      Tensor<double>&wte = in("wte"), &wpe = in("wpe");
      wte.pull();
      wpe.pull();
      std::vector<double> ref(std::size_t(N) * C);
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < C; ++c) ref[n * C + c] = wte.h(in.ints[n] * C + c) + wpe.h((n % T_) * C + c);
      return Outs{{"out", ref, "", "", {}}};
    };
    r.exact_checks = [](const Shape& s, Inputs<double>& in, const Outs& o) {
      const int N = product(s, 0, 1), T_ = s[1], C = s[3], Tmax = s[4];
      Tensor<double>&wte = in("wte"), &wpe = in("wpe");
      const Out &out = find(o, "out"), &gpe = find(o, "dwpe");
      for (int n = 0; n < N; ++n)  // exact: one addition an element
        for (int c = 0; c < C; ++c)
          ASSERT_EQ(out.v[n * C + c], wte.h(in.ints[n] * C + c) + wpe.h((n % T_) * C + c)) << n << "," << c;
      for (int i = T_ * C; i < Tmax * C; ++i) EXPECT_EQ(gpe.v[i], 0.0) << "unused position, element " << i;
    };
    // The device path splits the vocabulary into 32 token ranges (V = 70: ranges of 3, the last one
    // short; V = 5: one token a range) and channels into blocks of 32; the host path walks the rows
    // with blocks of 64 channels side by side (C = 150: two whole blocks and a short one). Both modes:
    // each element's rows are added in row order on both paths.
    r.path_shapes = {{3, 7, 70, 33, 7}, {2, 5, 5, 1, 5}, {1, 1, 40, 64, 1}, {2, 9, 37, 150, 9}};
    r.path_repeat = 2;
    r.fast_shape = {4, 16, 20, 24, 16};
    r.fast_tol = 6e-7;  // measured 7.5e-8 (dwpe)
    r.split_shapes = {{6, 4, 5, 8, 4}};
    return r;
  }
};

// ---- Linear (forward, backward-input, backward-weight): shape {S, R rows a sample, I, O} ---------
struct LinearCase {
  template <class T>
  static Outs run(Mode mode, const Shape& s, Inputs<T>& in, const Calls& calls, bool backward) {
    const int R = s[1], I = s[2], O = s[3], N = s[0] * R;
    Tensor<T>&x = in("x"), &W = in("W"), &b = in("b"), &G = in("G");
    Tensor<T> y("y", N, O), dx("dx", N, I);
    GradAccum<T> dW("W", std::size_t(O) * I, mode), db("b", O, mode);
    dW.zero();
    db.zero();
    dW.defer_weight_samples(calls.hold, calls.by_reference);
    KernelWorkspace ws;
    for (auto [s0, k] : calls.calls) {
      const int r0 = s0 * R, nr = k * R;
      Linear<T>::forward(mode, x.rows_cmat(r0, nr), W.cmat(), b.cvec(), y.rows_mat(r0, nr), ws);
      if (!backward) continue;
      Linear<T>::backward_input(mode, G.rows_cmat(r0, nr), W.cmat(), dx.rows_mat(r0, nr), ws);
      Linear<T>::backward_weight(mode, x.rows_cmat(r0, nr), G.rows_cmat(r0, nr), R, dW, &db, ws);
    }
    Outs o = {forward_out("y", y, "G")};
    if (!backward) return o;
    if (calls.by_reference) {
      EXPECT_EQ(0u, dW.pending.x.size() + dW.pending.dy.size()) << "held samples copied";
    }
    Linear<T>::flush_weight(dW, ws);
    for (Out g : {grad_out("dx", dx, "x"), grad_out("dW", dW, "W"), grad_out("db", db, "b")}) o.push_back(g);
    return o;
  }

  static KernelRow row() {
    KernelRow r;
    r.name = "Linear";
    r.inputs = [](const Shape& s) {
      const int N = product(s, 0, 1), I = s[2], O = s[3];
      return std::vector<InputSpec>{{"x", N, I, -2.0, 2.0, D::differentiable, 31},
                                    {"W", O, I, -1.0, 1.0, D::differentiable, 42},
                                    {"b", O, 1, -1.0, 1.0, D::differentiable, 43},
                                    {"G", N, O, -1.0, 1.0, D::seed, 32}};
    };
    r.samples = [](const Shape& s) { return s[0]; };
    r.run_f = run<float>;
    r.run_d = run<double>;
    r.grad_shapes = {{2, 3, 5, 4}};
    r.reference = [](const Shape& s, Inputs<double>& in) {  // y = x W^T + b
      const int N = product(s, 0, 1), I = s[2], O = s[3];
      Tensor<double>&x = in("x"), &W = in("W"), &b = in("b");
      x.pull();
      W.pull();
      b.pull();
      std::vector<double> ref(std::size_t(N) * O);
      for (int n = 0; n < N; ++n)
        for (int o = 0; o < O; ++o) {
          double acc = b.h(o);
          for (int i = 0; i < I; ++i) acc += x.h(n * I + i) * W.h(o * I + i);
          ref[n * O + o] = acc;
        }
      return Outs{{"y", ref, "", "", {}}};
    };
    // Tile edges of the device GEMMs and of the batched backward-weight kernel (K = a whole k-block
    // at R = 8); N = 23, I = 45, O = 67 for the forward and backward-input.
    r.path_shapes = {{1, 1, 1, 1}, {3, 5, 70, 33}, {2, 9, 17, 65}, {5, 8, 9, 129}, {1, 17, 130, 7}, {1, 23, 45, 67}};
    r.fast_paths_differ =
        "fast mode's GEMMs run gemm_det on the host path and the vendor BLAS on the device path "
        "(fast_gemm_on_gemm_det, kernels/kernel_path.hpp): the fast-mode property holds both within tolerance";
    r.fast_shape = {4, 8, 48, 40};
    r.fast_tol = 1e-5;  // measured 2.5e-7 (dW); the vendor BLAS on the device path
    // R = 256 rows a sample makes gemm_det_exact's group 4 samples, so the splits hit a full group, an
    // overfull call and a remainder left for flush_weight; the host-only shape has partial
    // micro-panels and more than one row block (O > 192) and column block (I > 1024) of the host
    // path's exact GEMM (the device path's tile edges are the path shapes').
    r.split_shapes = {{6, 256, 16, 24}};
    r.host_split_shapes = {{6, 256, 1037, 205}};
    r.holds_back = true;
    return r;
  }
};

}  // namespace

const std::vector<KernelRow>& kernel_rows() {
  static const std::vector<KernelRow> rows = {
      LayerNormCase::row(),    GeluCase::row(),      AttentionCase::row(),
      CrossEntropyCase::row(), EmbeddingCase::row(), LinearCase::row(),
  };
  return rows;
}

}  // namespace minipipe::test
