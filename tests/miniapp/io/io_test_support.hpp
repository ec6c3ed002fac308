// Shared pieces of the HDF5 dump tests: an output directory set up once per process, and a
// deterministic dump-like content (datasets, attributes, values) that any rank can regenerate.
#pragma once

#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "miniapp/io/dump_writer.hpp"

namespace iotest {

namespace fs = std::filesystem;

// Set by the test main from --outdir (created empty by rank 0 before any test runs).
fs::path& outdir();

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Runs f and returns the message of the exception it threw, or "" if it threw none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// Number of ranks for which `flag` is true.
inline int count_ranks(bool flag) {
  int v = flag ? 1 : 0, sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

// Temporaries of `target` ("<name>.tmp.XXXXXX", or the old fixed "<name>.tmp") in its directory.
inline std::vector<fs::path> leftover_temporaries(const fs::path& target) {
  std::vector<fs::path> out;
  const std::string prefix = target.filename().string() + ".tmp";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(target.parent_path(), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

inline std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

// One dataset of the synthetic dump.
struct Spec {
  std::string path;
  std::vector<std::uint64_t> dims;
  minipipe::io::DType type;
  std::uint64_t rows() const { return dims.empty() ? 1 : dims[0]; }
  std::uint64_t row_elems() const {
    std::uint64_t n = 1;
    for (std::size_t i = 1; i < dims.size(); ++i) n *= dims[i];
    return n;
  }
  std::uint64_t elements() const { return rows() * row_elems(); }
};

// Shapes modelled on docs/design.md §5 (small), including a scalar, a 3-D activation and an empty
// dataset, with f32, f64 and i32.
inline std::vector<Spec> dump_specs() {
  using minipipe::io::DType;
  return {
      {"/init/params/wte", {37, 8}, DType::f32},
      {"/init/params/layer_00/qkv_w", {24, 8}, DType::f32},
      {"/step_0000/tokens", {6, 5}, DType::i32},
      {"/step_0000/loss", {}, DType::f64},
      {"/step_0000/per_sample_loss_sum", {6}, DType::f64},
      {"/step_0000/per_sample_tokens", {6}, DType::i32},
      {"/step_0000/activations/layer_00", {6, 5, 8}, DType::f32},
      {"/step_0000/grads/layer_00/qkv_w", {24, 8}, DType::f32},
      {"/step_0000/grads/empty", {0, 4}, DType::f32},
      {"step_0001/params/lnf_w", {8}, DType::f64},  // relative path: normalized to /step_0001/...
  };
}

inline std::uint64_t mix(std::uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Values of dataset `k` as raw native bytes: spread over many binades, signs and a few exact
// zeros, so a wrong row offset or a conversion would change bits.
inline std::vector<unsigned char> dataset_bytes(std::size_t k, const Spec& s) {
  const std::size_t es = minipipe::io::dtype_size(s.type);
  std::vector<unsigned char> out(s.elements() * es);
  for (std::uint64_t i = 0; i < s.elements(); ++i) {
    const std::uint64_t h = mix(k * 1000003ull + i);
    const double mant = static_cast<double>(h >> 11) / 9007199254740992.0 - 0.5;  // [-0.5, 0.5)
    const double v = (h % 17 == 0) ? 0.0 : std::ldexp(mant, static_cast<int>(h % 41) - 20);
    if (s.type == minipipe::io::DType::f32) {
      const float f = static_cast<float>(v);
      std::memcpy(&out[i * es], &f, es);
    } else if (s.type == minipipe::io::DType::f64) {
      std::memcpy(&out[i * es], &v, es);
    } else {
      const std::int32_t t = static_cast<std::int32_t>(h % 50257) - (h % 13 == 0 ? 50258 : 0);
      std::memcpy(&out[i * es], &t, es);
    }
  }
  return out;
}

// A deck-sized attribute above HDF5's 64 KiB compact-attribute limit.
inline std::string big_text() {
  std::string s;
  for (int i = 0; s.size() < 100000; ++i) s += "key_" + std::to_string(i) + " = " + std::to_string(i * 7) + "\n";
  return s;
}

// Collective part: every dataset and attribute of the synthetic dump.
inline void create_content(minipipe::io::DumpWriter& w) {
  for (const auto& s : dump_specs()) w.create_dataset(s.path, s.dims, s.type);
  w.set_attribute("/meta", "schedule", "1f1b");
  w.set_attribute("/meta", "p", 4LL);
  w.set_attribute("/meta", "lr", 3e-4);
  w.set_attribute("/meta", "deck", big_text());
  w.set_attribute("/meta", "empty", std::string());
  w.set_attribute("/step_0000/loss", "unit", "nats per token");
}

// Independent part. `rank`/`size` decide who writes what: even datasets are written whole by
// one rank (a different one for each dataset), odd ones are split into uneven row ranges over
// all ranks, each rank writing its rows in several calls, last rows first.
inline void write_content(minipipe::io::DumpWriter& w, int rank, int size) {
  const auto specs = dump_specs();
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const Spec& s = specs[k];
    const auto bytes = dataset_bytes(k, s);
    const std::size_t row_bytes = s.row_elems() * minipipe::io::dtype_size(s.type);
    if (k % 2 == 0 || s.rows() < 2) {
      if (static_cast<int>((k / 2) % static_cast<std::size_t>(size)) == rank)
        w.write_rows(s.path, 0, s.rows(), bytes.data(), s.type);
      continue;
    }
    // Rank r owns rows [b(r), b(r+1)) with b(r) = rows * r^2 / size^2: uneven, possibly empty.
    auto bound = [&](int r) {
      return s.rows() * static_cast<std::uint64_t>(r * r) / static_cast<std::uint64_t>(size * size);
    };
    const std::uint64_t lo = bound(rank), hi = bound(rank + 1);
    for (std::uint64_t end = hi; end > lo;) {
      const std::uint64_t begin = end > lo + 3 ? end - 3 : lo;
      w.write_rows(s.path, begin, end - begin, bytes.data() + begin * row_bytes, s.type);
      end = begin;
    }
  }
}

}  // namespace iotest
