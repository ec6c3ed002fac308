// MPI tests of the dump writer, run by ctest at 1, 2 and 4 ranks: split writes reproduce a
// single-rank file exactly, and every error is raised on every rank with no file left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <sstream>

#include "io_test_support.hpp"
#include "miniapp/io/compare.hpp"
#include "miniapp/io/dump_reader.hpp"

namespace {

using namespace iotest;
using minipipe::io::DType;
using minipipe::io::DumpError;
using minipipe::io::DumpReader;
using minipipe::io::DumpWriter;

// Rank 0 writes the reference alone (MPI_COMM_SELF); then all ranks write the same content
// split over MPI_COMM_WORLD. Both stay in the output directory for the h5diff checks in ctest.
TEST(DumpMpi, SplitWritesReproduceSingleRankFile) {
  const fs::path ref = outdir() / "reference.h5";
  const fs::path split = outdir() / "split.h5";
  if (world_rank() == 0) {
    DumpWriter w(MPI_COMM_SELF, ref, false);
    create_content(w);
    write_content(w, 0, 1);
    w.close();
  }
  {
    DumpWriter w(MPI_COMM_WORLD, split, false);
    create_content(w);
    write_content(w, world_rank(), world_size());
    w.close();
  }
  // close() returned on every rank: the file is complete and renamed for everyone.
  EXPECT_TRUE(fs::exists(split));
  EXPECT_TRUE(leftover_temporaries(split).empty());
  if (world_rank() != 0) return;

  std::ostringstream out;
  EXPECT_EQ(minipipe::io::compare_files(ref, split, {}, out), 0) << out.str();
  EXPECT_NE(out.str().find("summary: 10 datasets compared, 10 identical, 0 differing"), std::string::npos) << out.str();
  minipipe::io::CompareOptions with_meta;
  with_meta.include_meta = true;
  std::ostringstream out_meta;
  EXPECT_EQ(minipipe::io::compare_files(ref, split, with_meta, out_meta), 0) << out_meta.str();

  // Bytes read back equal the generator's bytes, dataset by dataset.
  const DumpReader r(split);
  const auto specs = dump_specs();
  for (std::size_t k = 0; k < specs.size(); ++k) {
    const auto info = r.info(specs[k].path);
    EXPECT_EQ(info.dims, specs[k].dims) << specs[k].path;
    EXPECT_EQ(info.type_text, minipipe::io::to_string(specs[k].type)) << specs[k].path;
    std::vector<unsigned char> got(info.elements() * info.elem_size);
    r.read_rows(info, 0, info.rows(), got.data());
    EXPECT_TRUE(got == dataset_bytes(k, specs[k])) << specs[k].path;
  }
  EXPECT_EQ(r.string_attribute("/meta", "deck"), big_text());
  EXPECT_EQ(r.string_attribute("/meta", "schedule"), "1f1b");
  EXPECT_EQ(r.string_attribute("/meta", "empty"), "");
  EXPECT_EQ(r.int_attribute("/meta", "p"), 4);
  EXPECT_EQ(r.double_attribute("/meta", "lr"), 3e-4);
  EXPECT_EQ(r.string_attribute("/step_0000/loss", "unit"), "nats per token");
}

TEST(DumpMpi, ExistingPathWithoutForceThrowsOnEveryRankAndKeepsOldFile) {
  const fs::path p = outdir() / "existing.h5";
  if (world_rank() == 0) write_text(p, "precious old bytes");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string msg = error_of([&] { DumpWriter w(MPI_COMM_WORLD, p, false); });
  EXPECT_EQ(msg, "refusing to overwrite " + p.string() + "; pass --force");
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
  if (world_rank() == 0) {
    EXPECT_EQ(read_bytes(p), "precious old bytes");
    EXPECT_TRUE(leftover_temporaries(p).empty());
  }
}

TEST(DumpMpi, ForceReplacesExistingFileOnlyAtClose) {
  const fs::path p = outdir() / "forced.h5";
  if (world_rank() == 0) write_text(p, "old contents");
  MPI_Barrier(MPI_COMM_WORLD);
  DumpWriter w(MPI_COMM_WORLD, p, true);
  w.create_dataset("/x", {static_cast<std::uint64_t>(world_size())}, DType::i32);
  const std::int32_t mine = 100 + world_rank();
  w.write_rows("/x", world_rank(), 1, &mine);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    EXPECT_EQ(read_bytes(p), "old contents");  // a failed run would have kept it
  }
  w.close();
  if (world_rank() == 0) {
    std::vector<std::uint64_t> dims;
    const auto v = minipipe::io::read_i32(p, "/x", dims);
    ASSERT_EQ(dims, std::vector<std::uint64_t>{static_cast<std::uint64_t>(world_size())});
    for (int r = 0; r < world_size(); ++r) EXPECT_EQ(v[r], 100 + r);
    EXPECT_TRUE(leftover_temporaries(p).empty());
  }
}

TEST(DumpMpi, DestructorWithoutCloseLeavesNoFile) {
  const fs::path p = outdir() / "abandoned.h5";
  std::string tmp;
  bool tmp_seen = false;
  try {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    tmp = w.temp_path();
    w.create_dataset("/a/b", {4, 2}, DType::f64);
    const double row[2] = {1.0, 2.0};
    if (world_rank() == 0) w.write_rows("/a/b", 0, 1, row);
    MPI_Barrier(MPI_COMM_WORLD);
    tmp_seen = fs::exists(tmp);
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0's destructor must not unlink it before all have looked
    throw std::runtime_error("simulated failure mid-step");
  } catch (const std::runtime_error&) {
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_TRUE(tmp_seen);  // the writer really had a temporary file to clean up
  if (world_rank() == 0) {
    EXPECT_FALSE(fs::exists(p));
    EXPECT_FALSE(fs::exists(tmp));
  }
}

// One rank failing alone unwinds through the destructor while its peers are elsewhere (the
// driver then aborts). If the destructor did any collective work, rank 1 would wait for peers
// that are blocked in the barrier below, and this test would time out.
TEST(DumpMpi, DestructorOnOneRankAloneDoesNotWaitForPeers) {
  if (world_size() == 1) GTEST_SKIP() << "needs a peer that is not in the destructor";
  const fs::path p = outdir() / "lone_failure.h5";
  auto w = std::make_unique<DumpWriter>(MPI_COMM_WORLD, p, false);
  w->create_dataset("/x", {8}, DType::f32);
  if (world_rank() == 1) w.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    EXPECT_EQ(leftover_temporaries(p).size(), 1u);  // only rank 0's destructor unlinks it
  }
  w.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    EXPECT_FALSE(fs::exists(p));
    EXPECT_TRUE(leftover_temporaries(p).empty());
  }
}

TEST(DumpMpi, MissingDirectoryThrowsOnEveryRankNamingIt) {
  const fs::path dir = outdir() / "no_such_dir";
  const std::string msg = error_of([&] { DumpWriter w(MPI_COMM_WORLD, dir / "x.h5", false); });
  EXPECT_NE(msg.find("directory " + dir.string() + " does not exist"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
}

TEST(DumpMpi, ParentThatIsAFileThrowsOnEveryRankNamingIt) {
  const fs::path file = outdir() / "plain_file";
  if (world_rank() == 0) write_text(file, "x");
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string msg = error_of([&] { DumpWriter w(MPI_COMM_WORLD, file / "x.h5", false); });
  EXPECT_NE(msg.find(file.string() + " is not a directory"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
}

TEST(DumpMpi, UnwritableDirectoryThrowsOnEveryRankNamingIt) {
  // Permission bits do not stop root (the usual container user), so root gets the case that
  // stops everyone: /proc, where no file can be created; non-root also gets a 0555 directory.
  std::string msg = error_of([&] { DumpWriter w(MPI_COMM_WORLD, "/proc/minipipe_io_test.h5", false); });
  EXPECT_NE(msg.find("/proc"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
  EXPECT_FALSE(fs::exists("/proc/minipipe_io_test.h5"));
  if (geteuid() == 0) return;
  const fs::path ro = outdir() / "read_only";
  if (world_rank() == 0) {
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0555);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  msg = error_of([&] { DumpWriter w(MPI_COMM_WORLD, ro / "x.h5", false); });
  EXPECT_NE(msg.find("directory " + ro.string() + " is not writable"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
}

TEST(DumpMpi, IncompleteOrDoublyWrittenDumpIsRejectedAtCloseOnEveryRank) {
  const fs::path p = outdir() / "incomplete.h5";
  std::string msg = error_of([&] {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    w.create_dataset("/full", {3}, DType::f32);
    w.create_dataset("/holes", {10, 2}, DType::f32);
    const std::vector<float> data(20, 1.5f);
    if (world_rank() == world_size() - 1) {
      w.write_rows("/full", 0, 3, data.data());
      w.write_rows("/holes", 2, 3, data.data());  // rows 0-1 and 5-9 never written
    }
    w.close();
  });
  EXPECT_NE(msg.find("dataset /holes [10,2] rows [0, 2) never written"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dataset /holes [10,2] rows [5, 10) never written"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("/full"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());

  msg = error_of([&] {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    w.create_dataset("/twice", {4}, DType::i32);
    const std::int32_t data[4] = {1, 2, 3, 4};
    if (world_rank() == 0) w.write_rows("/twice", 0, 3, data);
    if (world_rank() == world_size() - 1) w.write_rows("/twice", 2, 2, data + 2);  // row 2 again
    w.close();
  });
  EXPECT_NE(msg.find("dataset /twice [4] rows [2, 3) written more than once"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
  if (world_rank() == 0) {
    EXPECT_FALSE(fs::exists(p));
    EXPECT_TRUE(leftover_temporaries(p).empty());
  }
}

TEST(DumpMpi, DisagreeingCollectiveArgumentsThrowOnEveryRankInsteadOfHanging) {
  if (world_size() == 1) GTEST_SKIP() << "needs two ranks to disagree";
  const fs::path p = outdir() / "disagree.h5";
  DumpWriter w(MPI_COMM_WORLD, p, false);
  const std::string msg =
      error_of([&] { w.create_dataset("/x", {static_cast<std::uint64_t>(world_rank() + 1)}, DType::f32); });
  EXPECT_NE(msg.find("ranks passed different arguments"), std::string::npos) << msg;
  EXPECT_EQ(count_ranks(!msg.empty()), world_size());
  // Nothing was created, so the writer is still usable and closes into a valid empty dump.
  w.create_dataset("/y", {}, DType::f64);
  const double v = 2.5;
  if (world_rank() == 1) w.write_rows("/y", 0, 1, &v);
  w.close();
  if (world_rank() == 0) {
    const DumpReader r(p);
    EXPECT_FALSE(r.has_dataset("/x"));
    std::vector<std::uint64_t> dims;
    EXPECT_EQ(r.read_f64("/y", dims), std::vector<double>{2.5});
    EXPECT_TRUE(dims.empty());
  }
}

}  // namespace
