// minipipe_reference_check: checks a real run's HDF5 dump against the independent double
// reference (tests/reference/gpt2_reference.*) and the docs/design.md §5 schema. Exit 0 pass, 1 fail, 2 error.
//
// Tolerances, derived from floating-point error (u = 2^-24 for a float32 run, 2^-53 for double).
// Inside one layer the longest chain of roundings is a reduction of K = max(4C, V, T) + C terms
// (the widest GEMM inner dimension, or the softmax / logsumexp over T or V, then a LayerNorm over
// C). Its worst-case relative error is gamma_K ~ K u (Higham, Accuracy and Stability, Lemma 3.1);
// with round-to-nearest and errors that are independent and mean-zero it is at most lambda
// sqrt(K) u with probability >= 1 - 2 exp(-lambda^2 / 2) (Higham & Mary, SIAM J. Sci. Comput.
// 41(5), 2019); lambda = 4 also absorbs LayerNorm's division by the standard deviation. A tensor
// d layers deep carries the errors of all d layers, so it is checked with
//     max_i |run_i - ref_i| <= 4 d sqrt(K) u max_i |ref_i|          (normwise, per tensor)
// with d = 1 for the embedding, l+2 for block l's output, L+2 for lnf, L+3 for the loss and
// dL/d(lnf input), L+3+(L-l) for dL/d(block l input) and 2L+4 for parameter gradients. Measured
// on the test decks, errors sit 20-200x below this (the worst error/tolerance ratio is printed).
// The optimizer update is checked elementwise from the run's own gradients (so AdamW's
// g/sqrt(v) cannot amplify gradient noise): its error is a few roundings of the magnitudes that
// enter it, and the moments gain one rounding per step, so
//     |run - ref| <= 16 step u (|p_prev| + |p_new| + lr |m|/(sqrt(vhat)+eps))
// with |m| accumulated from |g| (SGD: lr |d|). Per-sample valid-token counts must match exactly.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include "dump_schema.hpp"
#include "gpt2_reference.hpp"

namespace ref = minipipe::reference;
namespace io = minipipe::io;

namespace {

std::vector<double> read_real(const io::DumpReader& r, const std::string& path, std::vector<std::uint64_t>& dims) {
  const io::DatasetInfo d = r.info(path);
  if (d.type_text == "f64") return r.read_f64(path, dims);
  if (d.type_text == "f32") {
    const auto f = r.read_f32(path, dims);
    return std::vector<double>(f.begin(), f.end());
  }
  throw io::ReadError(r.path() + ": " + path + " has type " + d.type_text + ", expected f32 or f64");
}
std::vector<double> read_real(const io::DumpReader& r, const std::string& path) {
  std::vector<std::uint64_t> dims;
  return read_real(r, path, dims);
}

struct Row {
  int step;
  std::string group, name;
  double err, tol;
  std::string where;  // first offending element
};

// max|a-b| / max|ref|, with NaN or size mismatch as +inf. `where` names the worst element.
double normwise_error(const std::vector<double>& run, const std::vector<double>& refv, std::string& where) {
  if (run.size() != refv.size()) {
    where = "size " + std::to_string(run.size()) + " vs " + std::to_string(refv.size());
    return std::numeric_limits<double>::infinity();
  }
  double num = 0, den = 0;
  std::size_t worst = 0;
  for (std::size_t i = 0; i < run.size(); ++i) {
    const double e = std::fabs(run[i] - refv[i]);
    if (!(e <= num)) num = std::isnan(e) ? std::numeric_limits<double>::infinity() : e, worst = i;
    den = std::max(den, std::fabs(refv[i]));
  }
  std::ostringstream os;
  if (!run.empty()) os << "element " << worst << ": run " << run[worst] << ", reference " << refv[worst];
  where = os.str();
  if (num == 0) return 0;
  return den > 0 ? num / den : std::numeric_limits<double>::infinity();
}

struct Checker {
  const ref::RunInfo& info;
  double u = 0, K = 0, tol_scale = 1;
  std::vector<Row> rows;
  bool verbose = false;

  double tol(int depth) const { return tol_scale * 4.0 * depth * std::sqrt(K) * u; }

  void add(int step, const std::string& group, const std::string& name, const std::vector<double>& run,
           const std::vector<double>& refv, int depth) {
    Row r{step, group, name, 0, tol(depth), {}};
    r.err = normwise_error(run, refv, r.where);
    rows.push_back(r);
  }
};

// Checks one step; `params` are the run's parameters entering the step (updated in place to the
// run's parameters after it), `state` the reference optimizer state.
void check_step(const io::DumpReader& r, Checker& ck, int k, ref::Params& params,
                std::map<std::string, ref::Moments>& state, bool full, bool kernels) {
  const ref::RunInfo& info = ck.info;
  const ref::Shape& s = info.shape;
  const int L = s.n_layer;
  const std::string g = ref::step_group(k);
  std::vector<std::uint64_t> dims;
  const auto tokens = r.read_i32(g + "/tokens", dims);
  const auto targets = r.read_i32(g + "/targets", dims);
  const ref::StepResult res = ref::run_step(s, params, tokens, targets, info.B);

  std::vector<double> loss = read_real(r, g + "/loss");
  ck.add(k, "loss", "loss", loss, {res.loss}, L + 3);
  ck.add(k, "loss", "per_sample_loss_sum", read_real(r, g + "/per_sample_loss_sum"), res.per_sample_loss_sum, L + 3);
  const auto count = r.read_i32(g + "/per_sample_tokens", dims);
  {
    Row row{k, "loss", "per_sample_tokens (exact)", 0, 0, {}};
    for (std::size_t i = 0; i < count.size(); ++i)
      if (count[i] != res.per_sample_tokens.at(i)) {
        row.err = std::numeric_limits<double>::infinity();
        row.where = "sample " + std::to_string(i) + ": run " + std::to_string(count[i]) + ", reference " +
                    std::to_string(res.per_sample_tokens[i]);
        break;
      }
    ck.rows.push_back(row);
  }
  if (full) {
    ck.add(k, "activations", "embedding", read_real(r, g + "/activations/embedding"), res.activations.at("embedding"),
           1);
    for (int l = 0; l < L; ++l) {
      const std::string n = ref::layer_name(l);
      ck.add(k, "activations", n, read_real(r, g + "/activations/" + n), res.activations.at(n), l + 2);
      ck.add(k, "input_grads", n, read_real(r, g + "/input_grads/" + n), res.input_grads.at(n), L + 3 + (L - l));
    }
    ck.add(k, "activations", "lnf", read_real(r, g + "/activations/lnf"), res.activations.at("lnf"), L + 2);
    ck.add(k, "input_grads", "lnf", read_real(r, g + "/input_grads/lnf"), res.input_grads.at("lnf"), L + 3);
  }
  // Kernel level: the block intermediates the reference forms (as deep as their block's output
  // or input gradient).
  if (kernels)
    for (const auto& [name, refv] : res.kernels) {
      const int l = std::stoi(name.substr(6, name.find('/') - 6));  // "layer_NN/..."
      const bool backward = name.compare(name.find('/') + 1, 2, "d_") == 0;
      ck.add(k, "kernels", name, read_real(r, g + "/kernels/" + name), refv, backward ? L + 3 + (L - l) : l + 2);
    }
  // Gradients against the reference; the update against the reference optimizer applied to the
  // run's own gradients.
  for (const auto& [name, pdims] : ref::parameter_table(s)) {
    const std::vector<double> grad = read_real(r, g + "/grads/" + name);
    ck.add(k, "grads", name, grad, res.grads.at(name), 2 * L + 4);
    std::vector<double> expect = params.at(name).v;
    const std::vector<double> prev = expect;
    std::vector<double> magnitude;
    ref::optimizer_update(info.opt, k + 1, pdims.size() == 2, expect, grad, state[name], magnitude);
    const std::vector<double> got = read_real(r, g + "/params/" + name);
    Row row{k, "update", name, 0, 16.0 * (k + 1) * ck.u * ck.tol_scale, {}};
    if (got.size() != expect.size()) {
      row.err = std::numeric_limits<double>::infinity();
      row.where = "size differs";
    }
    for (std::size_t i = 0; i < got.size() && i < expect.size(); ++i) {
      const double scale = std::fabs(prev[i]) + std::fabs(expect[i]) + magnitude[i];
      const double e = std::fabs(got[i] - expect[i]);
      const double rel = e == 0 ? 0 : (scale > 0 ? e / scale : std::numeric_limits<double>::infinity());
      if (!(rel <= row.err)) {
        row.err = std::isnan(rel) ? std::numeric_limits<double>::infinity() : rel;
        std::ostringstream os;
        os << "element " << i << ": run " << got[i] << ", reference " << expect[i] << " (before " << prev[i] << ")";
        row.where = os.str();
      }
    }
    ck.rows.push_back(row);
    params.at(name).v = got;  // the next step starts from the run's parameters
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Check a minipipe dump against an independent double-precision GPT-2 reference and the docs/design.md §5 "
      "schema. Exit 0 pass, 1 mismatch, 2 error."};
  std::string dump, tokens_file, tokens_dataset = "tokens";
  bool schema_only = false, need_padding = false, need_uneven = false, verbose = false;
  int need_steps = 0;
  double tol_scale = 1.0;
  app.add_option("DUMP", dump, "HDF5 dump of a minipipe run")->required();
  app.add_flag("--schema-only", schema_only, "only check the docs/design.md §5 layout (any dump level)");
  app.add_flag("--require-padding", need_padding, "fail unless some target is padding (-1)");
  app.add_flag("--require-uneven", need_uneven, "fail unless the micro-batches differ in size (B % m != 0)");
  app.add_option("--require-steps", need_steps, "fail unless the dump holds at least this many steps");
  app.add_option("--tokens-file", tokens_file, "HDF5 token file the run read: its rows must be the dumped tokens");
  app.add_option("--tokens-dataset", tokens_dataset, "dataset in --tokens-file (default tokens)");
  app.add_option("--tol-scale", tol_scale, "multiply every tolerance (default 1)")->check(CLI::PositiveNumber);
  app.add_flag("-v,--verbose", verbose, "one line per tensor, not only the worst of each group");
  CLI11_PARSE(app, argc, argv);

  try {
    const io::DumpReader r(dump);
    const ref::RunInfo info = ref::read_run_info(r);
    std::cout << "dump " << dump << ": schedule " << info.schedule << ", p = " << info.p << ", v = " << info.v
              << ", m = " << info.m << ", B = " << info.B << ", " << info.steps << " step(s), level " << info.level
              << ", mode " << info.mode << ", " << (info.float_type.empty() ? "?" : info.float_type) << ", optimizer "
              << info.opt.kind << "\n";
    int failures = 0;
    const auto problems = ref::check_schema(r, info);
    for (const auto& p : problems) std::cout << "SCHEMA " << p << "\n";
    failures += static_cast<int>(problems.size());
    std::cout << "schema (docs/design.md §5, level " << info.level
              << "): " << (problems.empty() ? "complete" : "FAILED") << "\n";
    if (!problems.empty()) return 1;

    // Coverage the calling test claims.
    long long pads = 0;
    for (int k = 0; k < info.steps; ++k) {
      std::vector<std::uint64_t> dims;
      for (int t : r.read_i32(ref::step_group(k) + "/targets", dims)) pads += t < 0;
    }
    std::cout << "padding targets: " << pads << "; micro-batch sizes " << (info.B % info.m ? "uneven" : "even")
              << " (B = " << info.B << ", m = " << info.m << ")\n";
    auto require = [&](bool ok, const std::string& what) {
      if (!ok) std::cout << "FAIL: " << what << "\n", ++failures;
    };
    if (need_padding) require(pads > 0, "--require-padding: no target is -1");
    if (need_uneven) require(info.B % info.m != 0, "--require-uneven: B % m == 0");
    if (need_steps > 0) require(info.steps >= need_steps, "--require-steps: the dump holds fewer steps");

    if (!tokens_file.empty()) {
      // File input convention (data.dataset, int32 [N, T+1]): sample g of the run is row g mod N;
      // tokens are row[0..T) (-1 read as token 0), targets row[1..T], -1 where row[t] is -1.
      const io::DumpReader tf(tokens_file);
      std::vector<std::uint64_t> fd, dims;
      const auto rows = tf.read_i32(tokens_dataset, fd);
      const std::size_t T = info.shape.seq_len;
      std::size_t bad = 0;
      for (int k = 0; k < info.steps; ++k) {
        const auto tok = r.read_i32(ref::step_group(k) + "/tokens", dims);
        const auto tgt = r.read_i32(ref::step_group(k) + "/targets", dims);
        for (int b = 0; b < info.B; ++b) {
          const std::size_t row = (static_cast<std::size_t>(k) * info.B + b) % fd.at(0);
          for (std::size_t t = 0; t < T; ++t) {
            const int x = rows[row * (T + 1) + t], y = rows[row * (T + 1) + t + 1];
            bad += tok[b * T + t] != (x < 0 ? 0 : x) || tgt[b * T + t] != (x < 0 ? -1 : y);
          }
        }
      }
      std::cout << "tokens from " << tokens_file << ": " << (bad ? std::to_string(bad) + " mismatching" : "all match")
                << "\n";
      require(bad == 0, "dumped tokens/targets are not the token file's rows");
    }
    if (schema_only) {
      std::cout << (failures ? "FAIL" : "PASS") << "\n";
      return failures ? 1 : 0;
    }
    if (info.level == "loss") {
      std::cout << "FAIL: dump level loss has no parameters to recompute from; use grads or full\n";
      return 1;
    }

    Checker ck{info, 0, 0, 1, {}, false};
    ck.u = info.float_type == "f64" ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
    ck.K = std::max({4 * info.shape.channels, info.shape.vocab, info.shape.seq_len}) + info.shape.channels;
    ck.tol_scale = tol_scale;
    ck.verbose = verbose;
    ref::Params params;
    for (const auto& [name, pdims] : ref::parameter_table(info.shape)) {
      ref::Tensor t;
      t.v = read_real(r, "/init/params/" + name, t.dims);
      params[name] = std::move(t);
    }
    std::map<std::string, ref::Moments> state;
    for (int k = 0; k < info.steps; ++k)
      check_step(r, ck, k, params, state, info.level == "full" || info.level == "kernels", info.level == "kernels");

    // Report: the worst tensor of each (step, group), every failing tensor, and the margin.
    double worst_ratio = 0;
    std::map<std::pair<int, std::string>, const Row*> worst;
    for (const Row& row : ck.rows) {
      const double ratio = row.tol > 0 ? row.err / row.tol : (row.err > 0 ? INFINITY : 0);
      worst_ratio = std::max(worst_ratio, ratio);
      const Row*& w = worst[{row.step, row.group}];
      if (!w || (w->tol > 0 ? w->err / w->tol : w->err) < ratio) w = &row;
      const bool bad = !(row.err <= row.tol);
      if (bad) ++failures;
      if (bad || verbose)
        std::printf("%s step %d %-11s %-24s err %.3e tol %.3e  %s\n", bad ? "FAIL" : "    ", row.step,
                    row.group.c_str(), row.name.c_str(), row.err, row.tol, bad ? row.where.c_str() : "");
    }
    for (const auto& [key, row] : worst)
      std::printf("step %d %-11s worst %-24s err %.3e tol %.3e\n", key.first, key.second.c_str(), row->name.c_str(),
                  row->err, row->tol);
    std::printf("%zu tensors checked, %d failing; worst error / tolerance = %.3g\n", ck.rows.size(), failures,
                worst_ratio);
    std::cout << (failures ? "FAIL" : "PASS") << "\n";
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return 2;
  }
}
