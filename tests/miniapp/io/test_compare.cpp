// Tests of `compare` on small dumps with known differences: one ULP in a float or a double,
// shape/type/presence mismatches, tolerance mode, /meta handling, junk files, and the CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "io_test_support.hpp"
#include "miniapp/io/compare.hpp"
#include "miniapp/tools/compare_tool.hpp"

namespace {

using namespace iotest;
using minipipe::io::CompareOptions;
using minipipe::io::CompareReport;
using minipipe::io::DiffStatus;
using minipipe::io::DType;
using minipipe::io::DumpWriter;

struct Item {
  std::string path;
  std::vector<std::uint64_t> dims;
  DType type;
  std::vector<unsigned char> bytes;
};

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<Item> base_items() {
  std::vector<float> w(12);
  for (int i = 0; i < 12; ++i) w[i] = 0.1f * static_cast<float>(i) - 0.37f;
  return {
      {"/grads/w", {3, 4}, DType::f32, bytes_of(w)},
      {"/loss", {}, DType::f64, bytes_of(std::vector<double>{2.75})},
      {"/params/d", {5}, DType::f64, bytes_of(std::vector<double>{1.0, -2.0, 1e-300, 0.5, 3.0})},
      {"/tokens", {2, 3}, DType::i32, bytes_of(std::vector<std::int32_t>{1, 2, 3, 4, 5, -1})},
  };
}

fs::path write_dump(const std::string& name, const std::vector<Item>& items, const std::string& schedule = "gpipe") {
  const fs::path p = outdir() / name;
  DumpWriter w(MPI_COMM_SELF, p, true);
  for (const auto& it : items) w.create_dataset(it.path, it.dims, it.type);
  w.set_attribute("/meta", "schedule", schedule);
  for (const auto& it : items) {
    const std::uint64_t rows = it.dims.empty() ? 1 : it.dims[0];
    w.write_rows(it.path, 0, rows, it.bytes.data(), it.type);
  }
  w.close();
  return p;
}

// The base dump and the one-ULP variant are also used by the CLI and h5diff checks in ctest.
fs::path base() {
  return write_dump("base.h5", base_items());
}

float element_f32(const Item& it, std::size_t i) {
  float v;
  std::memcpy(&v, it.bytes.data() + 4 * i, 4);
  return v;
}

fs::path one_ulp_dump() {
  auto items = base_items();
  float v = element_f32(items[0], 6);  // /grads/w[1][2]
  v = std::nextafter(v, std::numeric_limits<float>::infinity());
  std::memcpy(items[0].bytes.data() + 4 * 6, &v, 4);
  return write_dump("one_ulp.h5", items);
}

std::string run(const fs::path& a, const fs::path& b, const CompareOptions& opt, int* rc) {
  std::ostringstream out;
  *rc = minipipe::io::compare_files(a, b, opt, out);
  return out.str();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const minipipe::io::DatasetDiff& find(const CompareReport& r, const std::string& path) {
  for (const auto& d : r.datasets)
    if (d.path == path) return d;
  throw std::runtime_error("no diff entry for " + path);
}

TEST(CompareTest, IdenticalContentExits0AndIgnoresMetaUnlessAsked) {
  const auto a = base();
  const auto b = write_dump("same_other_meta.h5", base_items(), "1f1b");
  int rc = -1;
  std::string out = run(a, b, {}, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(
      out,
      "summary: 4 datasets compared, 4 identical, 0 differing; max abs 0, max rel 0, max normwise rel 0, max ulp 0\n"
      "first divergence: none\n");

  CompareOptions verbose;
  verbose.verbose = true;
  out = run(a, b, verbose, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(contains(out, "identical         /grads/w  f32 [3,4]\n")) << out;
  EXPECT_TRUE(contains(out, "identical         /loss  f64 []\n")) << out;

  CompareOptions meta;
  meta.include_meta = true;
  out = run(a, b, meta, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "ATTRIBUTE DIFFERS /meta@schedule  \"gpipe\" vs \"1f1b\"")) << out;
  EXPECT_TRUE(contains(out, "1 attributes compared, 1 differing")) << out;
  out = run(a, a, meta, &rc);
  EXPECT_EQ(rc, 0) << out;
}

TEST(CompareTest, OneUlpFloatChangeIsOneDifferingElementWithMaxUlp1) {
  const auto a = base();
  const auto b = one_ulp_dump();
  int rc = -1;
  const std::string out = run(a, b, {}, &rc);
  EXPECT_EQ(rc, 1) << out;
  const CompareReport r = minipipe::io::compare_dumps(a, b, {});
  const auto& d = find(r, "/grads/w");
  EXPECT_EQ(d.status, DiffStatus::differ);
  EXPECT_EQ(d.elements, 12u);
  EXPECT_EQ(d.differing, 1u);
  EXPECT_EQ(d.max_ulp, 1u);
  EXPECT_EQ(d.first_index, 6u);
  const float v0 = element_f32(base_items()[0], 6);
  const float v1 = std::nextafter(v0, std::numeric_limits<float>::infinity());
  const double abs = std::fabs(static_cast<double>(v1) - static_cast<double>(v0));
  EXPECT_EQ(d.max_abs, abs);
  EXPECT_EQ(d.max_rel, abs / std::max(std::fabs(static_cast<double>(v0)), std::fabs(static_cast<double>(v1))));
  EXPECT_EQ(r.identical, 3u);
  EXPECT_EQ(r.differing, 1u);
  EXPECT_EQ(r.max_ulp, 1u);
  EXPECT_TRUE(contains(out, "DIFFERENT         /grads/w  f32 [3,4]  1 of 12 elements differ; max abs ")) << out;
  EXPECT_TRUE(contains(out, "max ulp 1; first at [1,2]: ")) << out;
  EXPECT_TRUE(contains(out, "summary: 4 datasets compared, 3 identical, 1 differing; max abs ")) << out;
  // Identical ones are not listed; the first-divergence line comes last (paths outside a step have
  // no kernel, step or layer).
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_TRUE(contains(out, "\nfirst divergence: grads/w (kernel ?, step -, layer -) element 6 [1,2]: ")) << out;
  EXPECT_TRUE(contains(out, ", 1 ULP; 0 later datasets differ\n")) << out;
}

TEST(CompareTest, OneUlpDoubleChangeAndToleranceMode) {
  auto items = base_items();
  double v;
  std::memcpy(&v, items[2].bytes.data() + 8 * 3, 8);
  v = std::nextafter(v, 0.0);
  std::memcpy(items[2].bytes.data() + 8 * 3, &v, 8);
  const auto a = base();
  const auto b = write_dump("one_ulp_f64.h5", items);
  const CompareReport r = minipipe::io::compare_dumps(a, b, {});
  EXPECT_EQ(find(r, "/params/d").max_ulp, 1u);
  EXPECT_EQ(find(r, "/params/d").max_abs, 0.5 - v);
  EXPECT_EQ(r.exit_code, 1);

  CompareOptions loose;
  loose.rtol = 1e-12;
  int rc = -1;
  std::string out = run(a, b, loose, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "within tolerance  /params/d")) << out;
  EXPECT_TRUE(contains(out, "3 identical, 1 within tolerance, 0 differing")) << out;
  EXPECT_TRUE(
      contains(out, "max abs 5.55112e-17, max rel 1.11022e-16, max normwise rel 1.85037e-17, max ulp 1 (rtol 1e-12)"))
      << out;

  CompareOptions tight;
  tight.rtol = 1e-17;
  out = run(a, b, tight, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "DIFFERENT         /params/d")) << out;

  CompareOptions abs_only;
  abs_only.atol = 1e-15;
  EXPECT_EQ(minipipe::io::compare_dumps(a, b, abs_only).exit_code, 0);

  // Normwise: max|a-b| / max|a| over /params/d. Its largest magnitude decides the threshold.
  const CompareReport plain = minipipe::io::compare_dumps(a, b, {});
  const minipipe::io::DatasetDiff& d = find(plain, "/params/d");
  ASSERT_GT(d.max_magnitude, 0.0);
  EXPECT_EQ(d.norm_rel, d.max_abs / d.max_magnitude);
  CompareOptions norm_loose, norm_tight;
  norm_loose.norm_rtol = 2 * d.norm_rel;
  norm_tight.norm_rtol = d.norm_rel / 2;
  EXPECT_EQ(minipipe::io::compare_dumps(a, b, norm_loose).exit_code, 0);
  EXPECT_EQ(minipipe::io::compare_dumps(a, b, norm_tight).exit_code, 1);
}

TEST(CompareTest, ShapeTypeAndPresenceMismatchesExit1) {
  const auto a = base();
  auto shape = base_items();
  shape[0].dims = {4, 3};
  auto type = base_items();
  type[1] = {"/loss", {}, DType::f32, bytes_of(std::vector<float>{2.75f})};
  auto missing = base_items();
  missing.erase(missing.begin() + 3);
  missing.push_back({"/extra", {1}, DType::i32, bytes_of(std::vector<std::int32_t>{0})});

  int rc = -1;
  std::string out = run(a, write_dump("shape.h5", shape), {}, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "SHAPE MISMATCH    /grads/w  [3,4] vs [4,3]")) << out;
  EXPECT_TRUE(contains(out, "(0 in one file only, 1 shape/type mismatches)")) << out;

  out = run(a, write_dump("type.h5", type), {}, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "TYPE MISMATCH     /loss  f64 vs f32")) << out;

  out = run(a, write_dump("missing.h5", missing), {}, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(contains(out, "ONLY IN B         /extra  i32 [1]")) << out;
  EXPECT_TRUE(contains(out, "ONLY IN A         /tokens  i32 [2,3]")) << out;
  EXPECT_TRUE(contains(out, "summary: 5 datasets compared, 3 identical, 2 differing (2 in one file only")) << out;

  // A tolerance never excuses structural differences.
  CompareOptions loose;
  loose.rtol = 1.0;
  out = run(a, outdir() / "shape.h5", loose, &rc);
  EXPECT_EQ(rc, 1) << out;
}

TEST(CompareTest, UnreadableInputsExit2) {
  const auto a = base();
  const fs::path junk = outdir() / "not_hdf5.h5";
  write_text(junk, "plain text, not an HDF5 signature\n");
  int rc = -1;
  std::string out = run(a, junk, {}, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "error: " + junk.string() + " is not an HDF5 file\n");
  out = run(outdir() / "nope.h5", a, {}, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "error: cannot open " + (outdir() / "nope.h5").string() + ": no such file\n");
  out = run(a, outdir(), {}, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(contains(out, "is a directory")) << out;
}

TEST(CompareTest, UlpDistanceIsOrderedAcrossZeroSignsAndIntegers) {
  const float dm = std::numeric_limits<float>::denorm_min();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Item> a = {
      {"/across_zero", {1}, DType::f32, bytes_of(std::vector<float>{dm})},
      {"/signed_zero", {1}, DType::f32, bytes_of(std::vector<float>{0.0f})},
      {"/opposite", {1}, DType::f32, bytes_of(std::vector<float>{1.0f})},
      {"/nan", {2}, DType::f32, bytes_of(std::vector<float>{1.0f, nan})},
      {"/tokens", {3}, DType::i32, bytes_of(std::vector<std::int32_t>{5, -7, 0})},
      {"/big_f64", {1}, DType::f64, bytes_of(std::vector<double>{std::numeric_limits<double>::max()})},
  };
  std::vector<Item> b = a;
  b[0].bytes = bytes_of(std::vector<float>{-dm});
  b[1].bytes = bytes_of(std::vector<float>{-0.0f});
  b[2].bytes = bytes_of(std::vector<float>{-1.0f});
  b[3].bytes = bytes_of(std::vector<float>{nan, nan});
  b[4].bytes = bytes_of(std::vector<std::int32_t>{9, -7, -2147483647 - 1});
  b[5].bytes = bytes_of(std::vector<double>{-std::numeric_limits<double>::max()});
  const auto fa = write_dump("ulp_a.h5", a), fb = write_dump("ulp_b.h5", b);
  CompareOptions huge_tol;
  huge_tol.rtol = 1e30;
  const CompareReport r = minipipe::io::compare_dumps(fa, fb, huge_tol);
  EXPECT_EQ(find(r, "/across_zero").max_ulp, 2u);
  const auto& sz = find(r, "/signed_zero");
  EXPECT_EQ(sz.differing, 1u);  // bits differ
  EXPECT_EQ(sz.max_ulp, 0u);    // but +0 and -0 are the same point
  EXPECT_EQ(sz.max_abs, 0.0);
  EXPECT_EQ(find(r, "/opposite").max_ulp, 2u * 0x3f800000u);
  const auto& n = find(r, "/nan");
  EXPECT_EQ(n.differing, 1u);  // the NaN with identical bits is identical
  EXPECT_EQ(n.nan_mismatches, 1u);
  EXPECT_EQ(n.status, DiffStatus::differ);  // a NaN is never within tolerance
  EXPECT_TRUE(std::isinf(n.max_abs));
  const auto& t = find(r, "/tokens");
  EXPECT_EQ(t.differing, 2u);
  EXPECT_EQ(t.max_ulp, 2147483648u);  // |0 - INT32_MIN|
  EXPECT_EQ(t.max_abs, 2147483648.0);
  EXPECT_EQ(t.first_a, "5");
  EXPECT_EQ(t.first_b, "9");
  EXPECT_EQ(find(r, "/big_f64").max_ulp, 2u * 0x7fefffffffffffffull);  // no overflow
  EXPECT_EQ(r.exit_code, 1);
}

// NaN and signed zeros (docs/dump-format.md, "NaN and signed zeros"): compare is bitwise, so a NaN
// against a number, and two NaNs whose payloads differ, differ with no ULP distance ("n/a (NaN)",
// not the payload's bits counted as ULPs, and left out of max ulp); +0 vs -0 differs with 0 ULP,
// and the line says why. Each pair of files holds one dataset, so its line is the first divergence.
TEST(CompareTest, NanAndSignedZeroSemantics) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  std::uint32_t payload_bits = 0x7fc00001u;  // a quiet NaN with another payload
  float qnan2;
  std::memcpy(&qnan2, &payload_bits, sizeof qnan2);
  struct Case {
    std::string name;
    float a, b;
    std::string line_end;
  };
  const std::vector<Case> cases = {
      {"nan_number", qnan, 42.0f, "nan vs 42, ULP n/a (NaN); 0 later datasets differ"},
      {"number_nan", 42.0f, qnan, "42 vs nan, ULP n/a (NaN); 0 later datasets differ"},
      {"nan_payloads", qnan, qnan2, "nan vs nan, ULP n/a (NaN); 0 later datasets differ"},
      {"signed_zeros", 0.0f, -0.0f,
       "0 vs -0, 0 ULP (+0 vs -0: equal values, the sign bit differs); 0 later datasets differ"},
  };
  for (const auto& c : cases) {
    const auto fa =
        write_dump("nz_" + c.name + "_a.h5", {{"/x", {2}, DType::f32, bytes_of(std::vector<float>{1.0f, c.a})}});
    const auto fb =
        write_dump("nz_" + c.name + "_b.h5", {{"/x", {2}, DType::f32, bytes_of(std::vector<float>{1.0f, c.b})}});
    const CompareReport r = minipipe::io::compare_dumps(fa, fb, {});
    EXPECT_EQ(r.exit_code, 1) << c.name;
    const auto& d = find(r, "/x");
    EXPECT_EQ(d.differing, 1u) << c.name;
    EXPECT_EQ(d.max_ulp, 0u) << c.name;  // NaN: left out; signed zeros: the same point
    EXPECT_EQ(d.nan_mismatches, c.name == "signed_zeros" ? 0u : 1u) << c.name;
    const std::string line = minipipe::io::first_divergence_line(r);
    EXPECT_EQ(line, "first divergence: x (kernel ?, step -, layer -) element 1 [1]: " + c.line_end) << c.name;
  }
  // The same NaN bits in both files are identical (bitwise), as is the whole file.
  const auto fa = write_dump("nz_same_a.h5", {{"/x", {1}, DType::f32, bytes_of(std::vector<float>{qnan2})}});
  const auto fb = write_dump("nz_same_b.h5", {{"/x", {1}, DType::f32, bytes_of(std::vector<float>{qnan2})}});
  EXPECT_EQ(minipipe::io::compare_dumps(fa, fb, {}).exit_code, 0);
}

TEST(CompareTest, MetaDatasetsAreSkippedUnlessIncluded) {
  auto a = base_items(), b = base_items();
  a.push_back({"/meta/timings", {2}, DType::f64, bytes_of(std::vector<double>{1.0, 2.0})});
  b.push_back({"/meta/timings", {2}, DType::f64, bytes_of(std::vector<double>{1.5, 2.0})});
  const auto fa = write_dump("meta_a.h5", a), fb = write_dump("meta_b.h5", b);
  EXPECT_EQ(minipipe::io::compare_dumps(fa, fb, {}).exit_code, 0);
  CompareOptions meta;
  meta.include_meta = true;
  const auto r = minipipe::io::compare_dumps(fa, fb, meta);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(find(r, "/meta/timings").differing, 1u);
}

int cli(std::vector<std::string> args, std::string* out) {
  CLI::App app{"test"};
  minipipe::CompareTool tool;
  tool.attach(app);
  args.insert(args.begin(), "minipipe");
  std::vector<const char*> argv;
  for (auto& s : args) argv.push_back(s.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_TRUE(tool.sub->parsed());
  std::ostringstream os;
  const int rc = tool.run(os);
  *out = os.str();
  return rc;
}

TEST(CompareToolTest, SubcommandParsesOptionsAndReturnsExitCodes) {
  const std::string a = base(), b = one_ulp_dump();
  std::string out;
  EXPECT_EQ(cli({"compare", a, a}, &out), 0) << out;
  EXPECT_EQ(cli({"compare", a, b}, &out), 1) << out;
  EXPECT_TRUE(contains(out, "max ulp 1")) << out;
  EXPECT_EQ(cli({"compare", a, b, "--rtol", "1e-6"}, &out), 0) << out;
  EXPECT_TRUE(contains(out, "1 within tolerance")) << out;
  EXPECT_EQ(cli({"compare", a, b, "--atol", "1e-6", "-v"}, &out), 0) << out;
  EXPECT_TRUE(contains(out, "identical         /loss")) << out;
  EXPECT_EQ(cli({"compare", "--include-meta", a, write_dump("cli_meta.h5", base_items(), "zb-v")}, &out), 1) << out;
  EXPECT_EQ(cli({"compare", a, (outdir() / "absent.h5").string()}, &out), 2) << out;
  EXPECT_THROW(cli({"compare", a, b, "--rtol", "-1"}, &out), CLI::ValidationError);
  EXPECT_THROW(cli({"compare", a}, &out), CLI::RequiredError);
}

}  // namespace
