// Tests of `compare`'s dataflow order and first-divergence line (docs/design.md §5, contract B) on small
// dumps written here: the expected orders and lines are spelled out by hand from the contract.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include "io_test_support.hpp"
#include "miniapp/io/compare.hpp"

namespace {

using namespace iotest;
using minipipe::io::CompareOptions;
using minipipe::io::CompareReport;
using minipipe::io::DType;
using minipipe::io::DumpWriter;

// A dump as path -> float values (all f32) with shapes; the values are distinct per dataset.
struct Tensor {
  std::vector<std::uint64_t> dims;
  std::vector<float> v;
};
using Dump = std::map<std::string, Tensor>;

Tensor tensor(std::vector<std::uint64_t> dims, float seed) {
  std::uint64_t n = 1;
  for (auto d : dims) n *= d;
  Tensor t{std::move(dims), std::vector<float>(n)};
  for (std::uint64_t i = 0; i < n; ++i) t.v[i] = seed + 0.01f * static_cast<float>(i) - 0.125f;
  return t;
}

fs::path write(const std::string& name, const Dump& dump, const std::string& deck = "") {
  const fs::path p = outdir() / name;
  DumpWriter w(MPI_COMM_SELF, p, true);
  for (const auto& [path, t] : dump) w.create_dataset(path, t.dims, DType::f32);
  w.set_attribute("/meta", "schedule", "gpipe");
  if (!deck.empty()) w.set_attribute("/meta", "deck", deck);
  for (const auto& [path, t] : dump) w.write_rows(path, 0, t.dims.empty() ? 1 : t.dims[0], t.v.data(), DType::f32);
  w.close();
  return p;
}

// Two steps of a two-layer model with a few kernel-level datasets, listed here in the contract's
// dataflow order (what compare must reproduce); the map that writes them sorts them by name.
std::vector<std::string> dataflow_paths() {
  return {
      "/init/params/wte",
      "/init/params/layer_00/qkv_w",
      "/init/params/layer_01/ln1_w",
      "/init/params/lm_head_w",
      "/step_0000/tokens",
      "/step_0000/targets",
      "/step_0000/activations/embedding",
      "/step_0000/kernels/layer_00/ln1",
      "/step_0000/kernels/layer_00/ln1_rstd",
      "/step_0000/kernels/layer_00/qkv",
      "/step_0000/kernels/layer_00/res1",
      "/step_0000/kernels/layer_00/fc_proj",
      "/step_0000/activations/layer_00",
      "/step_0000/kernels/layer_01/qkv",
      "/step_0000/activations/layer_01",
      "/step_0000/activations/lnf",
      "/step_0000/kernels/head/logits",
      "/step_0000/per_sample_loss_sum",
      "/step_0000/loss",
      "/step_0000/kernels/head/dlogits",
      "/step_0000/input_grads/lnf",
      "/step_0000/kernels/layer_01/d_gelu",
      "/step_0000/kernels/layer_01/d_x_ln1",
      "/step_0000/input_grads/layer_01",
      "/step_0000/kernels/layer_00/d_fc",
      "/step_0000/input_grads/layer_00",
      "/step_0000/grads/lm_head_w",
      "/step_0000/grads/layer_01/ln1_w",
      "/step_0000/grads/layer_00/qkv_w",
      "/step_0000/grads/wte",
      "/step_0000/params/wte",
      "/step_0000/params/layer_00/qkv_w",
      "/step_0000/params/layer_01/ln1_w",
      "/step_0000/params/lm_head_w",
      "/step_0000/zz_unknown",  // unknown names: after the step's known ones, sorted
      "/step_0001/tokens",
      "/step_0001/activations/embedding",
      "/step_0001/kernels/layer_00/qkv",
      "/step_0001/activations/layer_00",
      "/step_0001/grads/wte",
      "/step_0001/params/wte",
  };
}

Dump model_dump() {
  Dump d;
  float seed = 0.5f;
  for (const auto& p : dataflow_paths()) {
    std::vector<std::uint64_t> dims = {2, 3, 4};
    if (p.find("params/") != std::string::npos || p.find("grads/") != std::string::npos) dims = {3, 4};
    if (p.find("/loss") != std::string::npos) dims = {};
    d[p] = tensor(dims, seed);
    seed += 1.0f;
  }
  return d;
}

// Moves element `flat` of `path` by `ulps` ULPs towards +inf.
void bump(Dump& d, const std::string& path, std::size_t flat, int ulps = 1) {
  float& x = d.at(path).v.at(flat);
  for (int i = 0; i < ulps; ++i) x = std::nextafter(x, std::numeric_limits<float>::infinity());
}

std::string text(float v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

struct Result {
  int rc = -1;
  std::string out, last_line;
};

Result compare(const fs::path& a, const fs::path& b, const CompareOptions& opt = {}) {
  Result r;
  std::ostringstream os;
  r.rc = minipipe::io::compare_files(a, b, opt, os);
  r.out = os.str();
  const auto end = r.out.find_last_not_of('\n');
  const auto start = r.out.rfind('\n', end);
  r.last_line =
      r.out.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1) + 1);
  return r;
}

TEST(CompareDataflowTest, DatasetsComeInTheContractsDataflowOrder) {
  const auto a = write("flow_a.h5", model_dump());
  const CompareReport rep = minipipe::io::compare_dumps(a, a, {});
  std::vector<std::string> got;
  for (const auto& d : rep.datasets) got.push_back(d.path);
  EXPECT_EQ(got, dataflow_paths());
  const Result r = compare(a, a);
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.last_line, "first divergence: none") << r.out;
}

TEST(CompareDataflowTest, KernelDatasetDivergenceNamesKernelElementValuesAndUlp) {
  Dump b = model_dump();
  const std::string qkv = "/step_0000/kernels/layer_00/qkv";
  // Element [1,2,3] of [2,3,4] is flat 1*12 + 2*4 + 3 = 23; three ULPs up. Later datasets that
  // differ too: the block output, a step-0 gradient and step 1's embedding.
  const float before = b.at(qkv).v[23];
  bump(b, qkv, 23, 3);
  const float after = b.at(qkv).v[23];
  bump(b, "/step_0000/activations/layer_00", 0);
  bump(b, "/step_0000/grads/wte", 5);
  bump(b, "/step_0001/activations/embedding", 7);
  // An earlier element of an earlier-sorting but later-computed dataset must not win.
  bump(b, "/step_0000/grads/layer_00/qkv_w", 0);
  const Result r = compare(write("flow_a.h5", model_dump()), write("flow_qkv.h5", b));
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.last_line,
            "first divergence: step_0000/kernels/layer_00/qkv (kernel Linear::forward (qkv_w), step 0, "
            "layer layer_00) element 23 [1,2,3]: " +
                text(before) + " vs " + text(after) + ", 3 ULP; 4 later datasets differ")
      << r.out;
  // The per-dataset lines come in the same order, before the summary.
  const auto p_qkv = r.out.find("DIFFERENT         " + qkv);
  const auto p_act = r.out.find("DIFFERENT         /step_0000/activations/layer_00");
  const auto p_gq = r.out.find("DIFFERENT         /step_0000/grads/layer_00/qkv_w");
  const auto p_gw = r.out.find("DIFFERENT         /step_0000/grads/wte");
  const auto p_s1 = r.out.find("DIFFERENT         /step_0001/activations/embedding");
  const auto p_sum = r.out.find("summary: ");
  ASSERT_NE(p_s1, std::string::npos) << r.out;
  EXPECT_LT(p_qkv, p_act);
  EXPECT_LT(p_act, p_gq);
  EXPECT_LT(p_gq, p_gw);
  EXPECT_LT(p_gw, p_s1);
  EXPECT_LT(p_s1, p_sum);
}

TEST(CompareDataflowTest, ActivationDivergenceOnABlockLevelDump) {
  // Block-level dumps (no kernels/ group) are ordered the same way.
  Dump a, b;
  for (const auto& [p, t] : model_dump())
    if (p.find("/kernels/") == std::string::npos) a[p] = t;
  b = a;
  bump(b, "/step_0000/activations/layer_01", 13);
  bump(b, "/step_0000/input_grads/layer_00", 0);
  const Result r = compare(write("block_a.h5", a), write("block_b.h5", b));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0000/activations/layer_01 (kernel Elementwise::add (residual "
                              "2), step 0, layer layer_01) element 13 [1,0,1]: ",
                              0),
            0u)
      << r.out;
  EXPECT_NE(r.last_line.find(", 1 ULP; 1 later datasets differ"), std::string::npos) << r.last_line;
}

TEST(CompareDataflowTest, BackwardKernelAndGradientDivergences) {
  // Backward runs layers in descending order: layer_01's d_x_ln1 comes before layer_00's d_fc.
  Dump b = model_dump();
  bump(b, "/step_0000/kernels/layer_00/d_fc", 2);
  bump(b, "/step_0000/kernels/layer_01/d_x_ln1", 4);
  Result r = compare(write("flow_a.h5", model_dump()), write("flow_bwd.h5", b));
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0000/kernels/layer_01/d_x_ln1 (kernel LayerNorm::backward_input "
                              "(ln1), step 0, layer layer_01) element 4 [0,1,0]: ",
                              0),
            0u)
      << r.out;
  EXPECT_NE(r.last_line.find("; 1 later datasets differ"), std::string::npos);

  // Gradients: model parameter order reversed, so the head's come first.
  b = model_dump();
  bump(b, "/step_0000/grads/layer_00/qkv_w", 0);
  bump(b, "/step_0000/grads/lm_head_w", 11);
  r = compare(write("flow_a.h5", model_dump()), write("flow_grads.h5", b));
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0000/grads/lm_head_w (kernel Linear::backward_weight (lm_head_w) "
                              "+ GradAccum::finalize, step 0, layer head) element 11 [2,3]: ",
                              0),
            0u)
      << r.out;
}

TEST(CompareDataflowTest, ParamsOfStepZeroComeBeforeStepOnesActivations) {
  Dump b = model_dump();
  bump(b, "/step_0001/activations/embedding", 0);
  bump(b, "/step_0001/tokens", 1);  // tokens of step 1 precede its embedding
  bump(b, "/step_0000/params/layer_01/ln1_w", 6);
  const std::string sgd_deck = "[train]\nbatch = 8\noptimizer = \"sgd\"\n";
  Result r = compare(write("flow_sgd_a.h5", model_dump(), sgd_deck), write("flow_params.h5", b, sgd_deck));
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0000/params/layer_01/ln1_w (kernel Sgd::update (ln1_w), step 0, "
                              "layer layer_01) element 6 [1,2]: ",
                              0),
            0u)
      << r.out;
  EXPECT_NE(r.last_line.find("; 2 later datasets differ"), std::string::npos) << r.last_line;

  // Without the step-0 change, step 1's tokens are first: step 1, the input data, no layer.
  b = model_dump();
  bump(b, "/step_0001/activations/embedding", 0);
  bump(b, "/step_0001/tokens", 1);
  r = compare(write("flow_a.h5", model_dump()), write("flow_s1.h5", b));
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0001/tokens (kernel input data, step 1, layer -) element 1", 0),
            0u)
      << r.out;
  // Initial parameters precede every step.
  b = model_dump();
  bump(b, "/step_0000/tokens", 0);
  bump(b, "/init/params/lm_head_w", 3);
  r = compare(write("flow_a.h5", model_dump()), write("flow_init.h5", b));
  EXPECT_EQ(
      r.last_line.rfind("first divergence: init/params/lm_head_w (kernel init (lm_head_w), step -, layer head)", 0), 0u)
      << r.out;
}

TEST(CompareDataflowTest, ToleranceAndOneFileDatasetsDoNotCountAsTheFirstDivergence) {
  Dump b = model_dump();
  bump(b, "/step_0000/kernels/layer_00/ln1", 0);  // one ULP: within rtol 1e-6
  bump(b, "/step_0000/loss", 0, 1000);            // beyond it
  b.erase("/step_0000/activations/embedding");    // in A only: skipped by the locator
  const auto fa = write("flow_a.h5", model_dump()), fb = write("flow_tol.h5", b);
  CompareOptions tol;
  tol.rtol = 1e-6;
  Result r = compare(fa, fb, tol);
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.last_line.rfind("first divergence: step_0000/loss (kernel CrossEntropy::sample_sums + global loss "
                              "reduction, step 0, layer head) element 0 []: ",
                              0),
            0u)
      << r.out;
  EXPECT_NE(r.last_line.find(", 1000 ULP; 0 later datasets differ"), std::string::npos) << r.last_line;

  // Only a dataset missing: exit 1 as before, and the locator says what it could compare.
  Dump c = model_dump();
  c.erase("/step_0000/activations/embedding");
  r = compare(fa, write("flow_missing.h5", c));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.last_line, "first divergence: none among the datasets both files hold (1 in one file only)");
}

}  // namespace
