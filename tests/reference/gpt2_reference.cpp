// The reference model's math, straight from docs/design.md §2: pre-LN GPT-2 blocks, causal attention,
// tanh-GELU, untied head, token cross-entropy over valid targets; backward by the chain rule.
#include "gpt2_reference.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace minipipe::reference {

namespace {

using Vec = std::vector<double>;
constexpr double kLnEps = 1e-5;  // docs/design.md §2: LayerNorm eps 1e-5, biased variance

// y (N,out) = x (N,in) W^T + b, W row-major (out,in) as torch.nn.Linear; b may be null.
Vec linear(const Vec& x, const Tensor& W, const Tensor* b, std::size_t N) {
  const std::size_t out = W.dims[0], in = W.dims[1];
  Vec y(N * out);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t o = 0; o < out; ++o) {
      double acc = b ? b->v[o] : 0.0;
      for (std::size_t i = 0; i < in; ++i) acc += x[n * in + i] * W.v[o * in + i];
      y[n * out + o] = acc;
    }
  return y;
}

// Backward of linear: returns dx (N,in); adds dW (out,in) and db (out) when given.
Vec linear_backward(const Vec& x, const Tensor& W, const Vec& dy, std::size_t N, Vec& dW, Vec* db) {
  const std::size_t out = W.dims[0], in = W.dims[1];
  Vec dx(N * in, 0.0);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t o = 0; o < out; ++o) {
      const double g = dy[n * out + o];
      if (db) (*db)[o] += g;
      for (std::size_t i = 0; i < in; ++i) {
        dx[n * in + i] += g * W.v[o * in + i];
        dW[o * in + i] += g * x[n * in + i];
      }
    }
  return dx;
}

struct LnCache {
  Vec xhat, rstd;  // (N,C), (N)
};

Vec layernorm(const Vec& x, const Tensor& w, const Tensor& b, std::size_t N, std::size_t C, LnCache& cache) {
  Vec y(N * C);
  cache.xhat.assign(N * C, 0.0);
  cache.rstd.assign(N, 0.0);
  for (std::size_t n = 0; n < N; ++n) {
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < C; ++c) mean += x[n * C + c];
    mean /= static_cast<double>(C);
    for (std::size_t c = 0; c < C; ++c) var += (x[n * C + c] - mean) * (x[n * C + c] - mean);
    var /= static_cast<double>(C);
    const double rstd = 1.0 / std::sqrt(var + kLnEps);
    cache.rstd[n] = rstd;
    for (std::size_t c = 0; c < C; ++c) {
      const double xh = (x[n * C + c] - mean) * rstd;
      cache.xhat[n * C + c] = xh;
      y[n * C + c] = xh * w.v[c] + b.v[c];
    }
  }
  return y;
}

// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with dxhat = dy w; dw += dy xhat, db += dy.
Vec layernorm_backward(const LnCache& cache, const Tensor& w, const Vec& dy, std::size_t N, std::size_t C, Vec& dw,
                       Vec& db) {
  Vec dx(N * C);
  for (std::size_t n = 0; n < N; ++n) {
    double m1 = 0, m2 = 0;
    for (std::size_t c = 0; c < C; ++c) {
      const double dxh = dy[n * C + c] * w.v[c];
      m1 += dxh;
      m2 += dxh * cache.xhat[n * C + c];
      dw[c] += dy[n * C + c] * cache.xhat[n * C + c];
      db[c] += dy[n * C + c];
    }
    m1 /= static_cast<double>(C);
    m2 /= static_cast<double>(C);
    for (std::size_t c = 0; c < C; ++c) {
      const double dxh = dy[n * C + c] * w.v[c];
      dx[n * C + c] = cache.rstd[n] * (dxh - m1 - cache.xhat[n * C + c] * m2);
    }
  }
  return dx;
}

const double kGeluS = std::sqrt(2.0 / M_PI);
double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kGeluS * (x + 0.044715 * x * x * x)));
}
double gelu_grad(double x) {
  const double th = std::tanh(kGeluS * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * kGeluS * (1.0 + 3.0 * 0.044715 * x * x);
}

// Causal multi-head attention of one sequence. qkv (T,3C): q in [0,C), k in [C,2C), v in
// [2C,3C), head h in columns [h*hs, (h+1)*hs) of each (GPT-2's split). P (H,T,T) softmax rows.
Vec attention(const double* qkv, std::size_t T, std::size_t C, std::size_t H, Vec& P) {
  const std::size_t hs = C / H, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  Vec y(T * C, 0.0);
  P.assign(H * T * T, 0.0);
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t t = 0; t < T; ++t) {
      double* p = &P[(h * T + t) * T];
      double mx = -INFINITY;
      for (std::size_t u = 0; u <= t; ++u) {
        double s = 0;
        for (std::size_t i = 0; i < hs; ++i) s += qkv[t * C3 + h * hs + i] * qkv[u * C3 + C + h * hs + i];
        p[u] = s * scale;
        mx = std::max(mx, p[u]);
      }
      double sum = 0;
      for (std::size_t u = 0; u <= t; ++u) sum += (p[u] = std::exp(p[u] - mx));
      for (std::size_t u = 0; u <= t; ++u) p[u] /= sum;
      for (std::size_t u = 0; u <= t; ++u)
        for (std::size_t i = 0; i < hs; ++i) y[t * C + h * hs + i] += p[u] * qkv[u * C3 + 2 * C + h * hs + i];
    }
  return y;
}

// Backward of attention for one sequence: dqkv (T,3C) from dy (T,C).
void attention_backward(const double* qkv, const Vec& P, const double* dy, std::size_t T, std::size_t C, std::size_t H,
                        double* dqkv) {
  const std::size_t hs = C / H, C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t t = 0; t < T; ++t) {
      const double* p = &P[(h * T + t) * T];
      Vec dp(t + 1);
      double dot = 0;
      for (std::size_t u = 0; u <= t; ++u) {
        double s = 0;
        for (std::size_t i = 0; i < hs; ++i) {
          s += dy[t * C + h * hs + i] * qkv[u * C3 + 2 * C + h * hs + i];
          dqkv[u * C3 + 2 * C + h * hs + i] += p[u] * dy[t * C + h * hs + i];
        }
        dp[u] = s;
        dot += p[u] * s;
      }
      for (std::size_t u = 0; u <= t; ++u) {
        const double ds = p[u] * (dp[u] - dot) * scale;
        for (std::size_t i = 0; i < hs; ++i) {
          dqkv[t * C3 + h * hs + i] += ds * qkv[u * C3 + C + h * hs + i];
          dqkv[u * C3 + C + h * hs + i] += ds * qkv[t * C3 + h * hs + i];
        }
      }
    }
}

const Tensor& param(const Params& ps, const std::string& name) {
  auto it = ps.find(name);
  if (it == ps.end()) throw std::runtime_error("reference: parameter '" + name + "' missing");
  return it->second;
}

// Everything a block's backward needs from its forward.
struct BlockCache {
  Vec x, ln1, qkv, atty, res1, ln2, fc, g;
  LnCache c1, c2;
  std::vector<Vec> P;  // per sample (H,T,T)
};

}  // namespace

// The kernel-level dump (docs/design.md §5) as the contract states it, written here once, apart from
// the product's table (miniapp/io/model_tensors.hpp): one line a tensor, in dataflow order within its
// scope and phase: scope (block: /kernels/layer_NN/, head: /kernels/head/), phase (forward, or
// backward: input gradients), name, dims over B T C H V (3C: 3 x C). dump_schema.cpp builds the
// expected datasets from it and tests/miniapp/dataflow_order.sh reads these lines for the order.
// BEGIN kernel tensors
const char* const kKernelTensors = R"kernels(
block forward  ln1        B T C
block forward  ln1_mean   B T
block forward  ln1_rstd   B T
block forward  qkv        B T 3C
block forward  att        B H T T
block forward  atty       B T C
block forward  attn_proj  B T C
block forward  res1       B T C
block forward  ln2        B T C
block forward  ln2_mean   B T
block forward  ln2_rstd   B T
block forward  fc         B T 4C
block forward  gelu       B T 4C
block forward  fc_proj    B T C
block backward d_gelu     B T 4C
block backward d_fc       B T 4C
block backward d_ln2      B T C
block backward d_res1_ln2 B T C
block backward d_res1     B T C
block backward d_atty     B T C
block backward d_qkv      B T 3C
block backward d_ln1      B T C
block backward d_x_ln1    B T C
head  forward  lnf_mean   B T
head  forward  lnf_rstd   B T
head  forward  logits     B T V
head  forward  losses     B T
head  backward dlogits    B T V
head  backward d_lnf      B T C
)kernels";
// END kernel tensors

const std::vector<KernelTensor>& kernel_tensors() {
  static const std::vector<KernelTensor> table = [] {
    std::vector<KernelTensor> t;
    std::istringstream lines(kKernelTensors);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      KernelTensor k;
      if (!(words >> k.scope >> k.phase >> k.name)) continue;
      for (std::string d; words >> d;) k.dims.push_back(d);
      t.push_back(k);
    }
    return t;
  }();
  return table;
}

std::vector<std::uint64_t> kernel_tensor_dims(const KernelTensor& k, const Shape& s, int B) {
  std::vector<std::uint64_t> dims;
  for (const std::string& d : k.dims) {
    const std::uint64_t times = d.size() > 1 ? std::stoull(d.substr(0, d.size() - 1)) : 1;
    const char x = d.back();
    const std::uint64_t v = x == 'B'   ? B
                            : x == 'T' ? s.seq_len
                            : x == 'C' ? s.channels
                            : x == 'H' ? s.n_head
                            : x == 'V' ? s.vocab
                                       : throw std::runtime_error("reference: kernel tensor '" + k.name +
                                                                  "' has an unknown dimension '" + d + "'");
    dims.push_back(times * v);
  }
  return dims;
}

std::string layer_name(int layer) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "layer_%02d", layer);
  return buf;
}

std::vector<std::pair<std::string, std::vector<std::uint64_t>>> parameter_table(const Shape& s) {
  using D = std::vector<std::uint64_t>;
  const std::uint64_t V = s.vocab, C = s.channels;
  std::vector<std::pair<std::string, D>> t = {{"wte", {V, C}}, {"wpe", {std::uint64_t(s.block_size), C}}};
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = layer_name(l) + "/";
    for (auto& e : std::vector<std::pair<std::string, D>>{{"ln1_w", {C}},
                                                          {"ln1_b", {C}},
                                                          {"qkv_w", {3 * C, C}},
                                                          {"qkv_b", {3 * C}},
                                                          {"attn_proj_w", {C, C}},
                                                          {"attn_proj_b", {C}},
                                                          {"ln2_w", {C}},
                                                          {"ln2_b", {C}},
                                                          {"fc_w", {4 * C, C}},
                                                          {"fc_b", {4 * C}},
                                                          {"fc_proj_w", {C, 4 * C}},
                                                          {"fc_proj_b", {C}}})
      t.push_back({p + e.first, e.second});
  }
  t.push_back({"lnf_w", {C}});
  t.push_back({"lnf_b", {C}});
  t.push_back({"lm_head_w", {V, C}});
  return t;
}

StepResult run_step(const Shape& s, const Params& ps, const std::vector<int>& tokens, const std::vector<int>& targets,
                    int B) {
  const std::size_t T = s.seq_len, C = s.channels, H = s.n_head, V = s.vocab, N = static_cast<std::size_t>(B) * T;
  const int L = s.n_layer;
  if (tokens.size() != N || targets.size() != N) throw std::runtime_error("reference: tokens/targets are not [B,T]");
  StepResult r;
  for (const auto& [name, dims] : parameter_table(s)) r.grads[name] = Vec(param(ps, name).v.size(), 0.0);

  // ---- forward ----
  const Tensor& wte = param(ps, "wte");
  const Tensor& wpe = param(ps, "wpe");
  Vec x(N * C);
  for (std::size_t n = 0; n < N; ++n) {
    const int tok = tokens[n];
    if (tok < 0 || tok >= s.vocab)
      throw std::runtime_error("reference: token " + std::to_string(tok) + " out of range");
    for (std::size_t c = 0; c < C; ++c) x[n * C + c] = wte.v[tok * C + c] + wpe.v[(n % T) * C + c];
  }
  r.activations["embedding"] = x;
  std::vector<BlockCache> cache(L);
  for (int l = 0; l < L; ++l) {
    const std::string p = layer_name(l) + "/";
    BlockCache& k = cache[l];
    k.x = x;
    k.ln1 = layernorm(x, param(ps, p + "ln1_w"), param(ps, p + "ln1_b"), N, C, k.c1);
    k.qkv = linear(k.ln1, param(ps, p + "qkv_w"), &param(ps, p + "qkv_b"), N);
    k.atty.assign(N * C, 0.0);
    k.P.resize(B);
    for (int b = 0; b < B; ++b) {
      Vec y = attention(&k.qkv[b * T * 3 * C], T, C, H, k.P[b]);
      std::copy(y.begin(), y.end(), k.atty.begin() + static_cast<std::ptrdiff_t>(b * T * C));
    }
    const Vec a = linear(k.atty, param(ps, p + "attn_proj_w"), &param(ps, p + "attn_proj_b"), N);
    k.res1.resize(N * C);
    for (std::size_t i = 0; i < N * C; ++i) k.res1[i] = x[i] + a[i];
    k.ln2 = layernorm(k.res1, param(ps, p + "ln2_w"), param(ps, p + "ln2_b"), N, C, k.c2);
    k.fc = linear(k.ln2, param(ps, p + "fc_w"), &param(ps, p + "fc_b"), N);
    k.g.resize(k.fc.size());
    for (std::size_t i = 0; i < k.fc.size(); ++i) k.g[i] = gelu(k.fc[i]);
    const Vec mlp = linear(k.g, param(ps, p + "fc_proj_w"), &param(ps, p + "fc_proj_b"), N);
    for (std::size_t i = 0; i < N * C; ++i) x[i] = k.res1[i] + mlp[i];
    r.activations[layer_name(l)] = x;
    for (const auto& [name, v] : std::vector<std::pair<const char*, const Vec*>>{{"ln1", &k.ln1},
                                                                                 {"qkv", &k.qkv},
                                                                                 {"atty", &k.atty},
                                                                                 {"attn_proj", &a},
                                                                                 {"res1", &k.res1},
                                                                                 {"ln2", &k.ln2},
                                                                                 {"fc", &k.fc},
                                                                                 {"gelu", &k.g},
                                                                                 {"fc_proj", &mlp}})
      r.kernels[p + name] = *v;
  }
  LnCache cf;
  const Vec lnf = layernorm(x, param(ps, "lnf_w"), param(ps, "lnf_b"), N, C, cf);
  r.activations["lnf"] = lnf;
  const Tensor& head = param(ps, "lm_head_w");
  const Vec logits = linear(lnf, head, nullptr, N);

  // ---- loss: sum of token losses over valid targets / valid tokens of the whole batch ----
  r.per_sample_loss_sum.assign(B, 0.0);
  r.per_sample_tokens.assign(B, 0);
  long long valid = 0;
  double total = 0;
  Vec probs(N * V, 0.0);
  for (std::size_t n = 0; n < N; ++n) {
    const int tgt = targets[n];
    if (tgt < 0) continue;
    if (tgt >= s.vocab) throw std::runtime_error("reference: target " + std::to_string(tgt) + " out of range");
    double mx = -INFINITY, sum = 0;
    for (std::size_t v = 0; v < V; ++v) mx = std::max(mx, logits[n * V + v]);
    for (std::size_t v = 0; v < V; ++v) sum += (probs[n * V + v] = std::exp(logits[n * V + v] - mx));
    for (std::size_t v = 0; v < V; ++v) probs[n * V + v] /= sum;
    const double tok_loss = std::log(sum) + mx - logits[n * V + tgt];
    r.per_sample_loss_sum[n / T] += tok_loss;
    r.per_sample_tokens[n / T] += 1;
    total += tok_loss;
    ++valid;
  }
  if (valid == 0) throw std::runtime_error("reference: the batch has no valid target");
  r.loss = total / static_cast<double>(valid);

  // ---- backward ----
  Vec dlogits(N * V, 0.0);
  for (std::size_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    for (std::size_t v = 0; v < V; ++v)
      dlogits[n * V + v] = (probs[n * V + v] - (static_cast<int>(v) == targets[n] ? 1.0 : 0.0)) / valid;
  }
  const Vec dlnf = linear_backward(lnf, head, dlogits, N, r.grads["lm_head_w"], nullptr);
  Vec dx = layernorm_backward(cf, param(ps, "lnf_w"), dlnf, N, C, r.grads["lnf_w"], r.grads["lnf_b"]);
  r.input_grads["lnf"] = dx;
  for (int l = L - 1; l >= 0; --l) {
    const std::string p = layer_name(l) + "/";
    BlockCache& k = cache[l];
    const Vec dg =
        linear_backward(k.g, param(ps, p + "fc_proj_w"), dx, N, r.grads[p + "fc_proj_w"], &r.grads[p + "fc_proj_b"]);
    Vec dfc(dg.size());
    for (std::size_t i = 0; i < dg.size(); ++i) dfc[i] = dg[i] * gelu_grad(k.fc[i]);
    const Vec dln2 = linear_backward(k.ln2, param(ps, p + "fc_w"), dfc, N, r.grads[p + "fc_w"], &r.grads[p + "fc_b"]);
    Vec dres1 =
        layernorm_backward(k.c2, param(ps, p + "ln2_w"), dln2, N, C, r.grads[p + "ln2_w"], r.grads[p + "ln2_b"]);
    for (std::size_t i = 0; i < N * C; ++i) dres1[i] += dx[i];
    const Vec datty = linear_backward(k.atty, param(ps, p + "attn_proj_w"), dres1, N, r.grads[p + "attn_proj_w"],
                                      &r.grads[p + "attn_proj_b"]);
    Vec dqkv(N * 3 * C, 0.0);
    for (int b = 0; b < B; ++b)
      attention_backward(&k.qkv[b * T * 3 * C], k.P[b], &datty[b * T * C], T, C, H, &dqkv[b * T * 3 * C]);
    const Vec dln1 =
        linear_backward(k.ln1, param(ps, p + "qkv_w"), dqkv, N, r.grads[p + "qkv_w"], &r.grads[p + "qkv_b"]);
    dx = layernorm_backward(k.c1, param(ps, p + "ln1_w"), dln1, N, C, r.grads[p + "ln1_w"], r.grads[p + "ln1_b"]);
    for (const auto& [name, v] : std::vector<std::pair<const char*, const Vec*>>{{"d_gelu", &dg},
                                                                                 {"d_fc", &dfc},
                                                                                 {"d_ln2", &dln2},
                                                                                 {"d_res1", &dres1},
                                                                                 {"d_atty", &datty},
                                                                                 {"d_qkv", &dqkv},
                                                                                 {"d_ln1", &dln1},
                                                                                 {"d_x_ln1", &dx}})
      r.kernels[p + name] = *v;
    for (std::size_t i = 0; i < N * C; ++i) dx[i] += dres1[i];
    r.input_grads[layer_name(l)] = dx;
  }
  Vec& gte = r.grads["wte"];
  Vec& gpe = r.grads["wpe"];
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t c = 0; c < C; ++c) {
      gte[tokens[n] * C + c] += dx[n * C + c];
      gpe[(n % T) * C + c] += dx[n * C + c];
    }
  // Every intermediate recorded is a tensor of the table, so the table is the one list of names.
  for (const auto& [path, v] : r.kernels) {
    const std::string name = path.substr(path.find('/') + 1);
    bool listed = false;
    for (const KernelTensor& k : kernel_tensors()) listed = listed || (k.scope == "block" && k.name == name);
    if (!listed) throw std::runtime_error("reference: intermediate '" + name + "' is not in kKernelTensors");
  }
  return r;
}

void optimizer_update(const Optimizer& opt, int step, bool decay, std::vector<double>& p, const std::vector<double>& g,
                      Moments& st, std::vector<double>& magnitude) {
  const std::size_t n = p.size();
  if (g.size() != n) throw std::runtime_error("reference: gradient and parameter sizes differ");
  for (auto* s : {&st.m, &st.v, &st.m_abs})
    if (s->empty()) s->assign(n, 0.0);
  magnitude.assign(n, 0.0);
  const double wd = decay ? opt.weight_decay : 0.0;
  if (opt.kind == "adamw") {
    const double bc1 = 1.0 - std::pow(opt.beta1, step), bc2 = 1.0 - std::pow(opt.beta2, step);
    for (std::size_t i = 0; i < n; ++i) {
      st.m[i] = opt.beta1 * st.m[i] + (1.0 - opt.beta1) * g[i];
      st.m_abs[i] = opt.beta1 * st.m_abs[i] + (1.0 - opt.beta1) * std::fabs(g[i]);
      st.v[i] = opt.beta2 * st.v[i] + (1.0 - opt.beta2) * g[i] * g[i];
      const double mhat = st.m[i] / bc1, vhat = st.v[i] / bc2;
      const double denom = std::sqrt(vhat) + opt.eps;
      magnitude[i] = opt.lr * (wd * std::fabs(p[i]) + st.m_abs[i] / bc1 / denom);
      p[i] = p[i] - opt.lr * wd * p[i] - opt.lr * mhat / denom;
    }
  } else if (opt.kind == "sgd") {
    for (std::size_t i = 0; i < n; ++i) {
      double d = g[i] + wd * p[i];
      double d_abs = std::fabs(g[i]) + wd * std::fabs(p[i]);
      if (opt.momentum != 0.0) {
        d = st.m[i] = opt.momentum * st.m[i] + d;
        d_abs = st.m_abs[i] = opt.momentum * st.m_abs[i] + d_abs;
      }
      magnitude[i] = opt.lr * d_abs;
      p[i] -= opt.lr * d;
    }
  } else {
    throw std::runtime_error("reference: unknown optimizer '" + opt.kind + "'");
  }
}

}  // namespace minipipe::reference
