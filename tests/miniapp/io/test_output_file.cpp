// Output integrity on one rank: exclusive temporaries that never follow a symlink, no-replace
// commits between concurrent writers (text files and dumps), up-front path checks, the
// signal-safe registry, and a dump that stops early keeping its completed steps.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <limits>

#include "io_test_support.hpp"
#include "miniapp/io/dump_reader.hpp"
#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
#include "miniapp/io/temp_registry.hpp"

namespace {

using namespace iotest;
using minipipe::io::check_input_file;
using minipipe::io::check_outputs;
using minipipe::io::DType;
using minipipe::io::DumpError;
using minipipe::io::DumpReader;
using minipipe::io::DumpWriter;
using minipipe::io::OutputError;
using minipipe::io::OutputFile;
using minipipe::io::PathError;
using minipipe::io::write_output_file;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void put(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = outdir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(OutputFileTest, WritesCompletelyOrNotAtAllAndLeavesNoTemporary) {
  const fs::path d = fresh_dir("text");
  const fs::path p = d / "r.json";
  std::string big(300000, 'x');  // several stream buffers
  write_output_file(p, false, [&](std::ostream& os) { os << big << "end"; });
  EXPECT_EQ(read_bytes(p), big + "end");
  EXPECT_TRUE(leftover_temporaries(p).empty());

  // A body that throws leaves neither the file nor a temporary.
  const fs::path q = d / "q.json";
  EXPECT_THROW(write_output_file(q, false,
                                 [](std::ostream& os) {
                                   os << "partial";
                                   throw std::runtime_error("body failed");
                                 }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(q));
  EXPECT_TRUE(leftover_temporaries(q).empty());
}

TEST(OutputFileTest, ExistingTargetIsKeptWithoutForceAndReplacedWithIt) {
  const fs::path d = fresh_dir("exists");
  const fs::path p = d / "t.svg";
  put(p, "keep");
  const std::string e = error_of([&] { write_output_file(p, false, [](std::ostream& os) { os << "new"; }); });
  EXPECT_TRUE(contains(e, "refusing to overwrite " + p.string())) << e;
  EXPECT_TRUE(contains(e, "--force")) << e;
  EXPECT_EQ(read_bytes(p), "keep");
  EXPECT_TRUE(leftover_temporaries(p).empty());
  write_output_file(p, true, [](std::ostream& os) { os << "new"; });
  EXPECT_EQ(read_bytes(p), "new");
}

// Two writers of one target: the first to finish wins, the second is refused and its content
// never reaches the file (the old fixed "<path>.tmp" let them share and mix one file).
TEST(OutputFileTest, ConcurrentWritersOfOneTargetNeverMix) {
  const fs::path d = fresh_dir("concurrent");
  const fs::path p = d / "r.json";
  OutputFile a(p, false), b(p, false);
  EXPECT_NE(a.temp_path(), b.temp_path());
  a.write("AAAA", 4);
  b.write("BBBBBBBB", 8);
  a.commit();
  const std::string e = error_of([&] { b.commit(); });
  EXPECT_TRUE(contains(e, "appeared while it was written")) << e;
  EXPECT_EQ(read_bytes(p), "AAAA");
  EXPECT_TRUE(leftover_temporaries(p).empty());
}

// A symlink planted at the old fixed temporary name, and one at every name of the form the
// writer would try first, is never followed: the victim file keeps its bytes.
TEST(OutputFileTest, PlantedSymlinksAreNeverFollowed) {
  const fs::path d = fresh_dir("symlink");
  const fs::path victim = d / "victim.txt";
  put(victim, "precious");
  const fs::path p = d / "out.json";
  fs::create_symlink(victim, p.string() + ".tmp");
  write_output_file(p, false, [](std::ostream& os) { os << "report"; });
  EXPECT_EQ(read_bytes(victim), "precious");
  EXPECT_EQ(read_bytes(p), "report");

  // The target itself a symlink to the victim: refused without force; with force the link is
  // replaced by the new file and the victim is untouched.
  const fs::path link = d / "link.json";
  fs::create_symlink(victim, link);
  EXPECT_TRUE(contains(error_of([&] { write_output_file(link, false, [](std::ostream& os) { os << "x"; }); }),
                       "refusing to overwrite"));
  write_output_file(link, true, [](std::ostream& os) { os << "x"; });
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_EQ(read_bytes(link), "x");
  EXPECT_EQ(read_bytes(victim), "precious");

  // The same for a dump: a symlink at "<dump>.tmp" (the red-team case) is not written through.
  const fs::path h5 = d / "d.h5";
  fs::create_symlink(victim, h5.string() + ".tmp");
  {
    DumpWriter w(MPI_COMM_WORLD, h5, false);
    w.create_dataset("/x", {2}, DType::f32);
    const float v[2] = {1.0f, 2.0f};
    w.write_rows("/x", 0, 2, v);
    w.close();
  }
  EXPECT_EQ(read_bytes(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(h5)));
}

// Two dumps of one path written at once: the second to close is refused and removed; the file
// holds exactly the first one's datasets.
TEST(OutputFileTest, ConcurrentDumpsOfOnePathNeverMix) {
  const fs::path d = fresh_dir("concurrent_dump");
  const fs::path p = d / "d.h5";
  auto a = std::make_unique<DumpWriter>(MPI_COMM_SELF, p, false);
  auto b = std::make_unique<DumpWriter>(MPI_COMM_SELF, p, false);
  EXPECT_NE(a->temp_path(), b->temp_path());
  a->create_dataset("/seed_1", {1}, DType::f64);
  b->create_dataset("/seed_2", {1}, DType::f64);
  const double one = 1, two = 2;
  a->write_rows("/seed_1", 0, 1, &one);
  b->write_rows("/seed_2", 0, 1, &two);
  a->close();
  const std::string e = error_of([&] { b->close(); });
  EXPECT_TRUE(contains(e, "refusing to overwrite " + p.string())) << e;
  const DumpReader r(p);
  std::vector<std::string> names;
  for (const auto& ds : r.list_datasets({"/meta"})) names.push_back(ds.path);
  EXPECT_EQ(names, std::vector<std::string>{"/seed_1"});
  EXPECT_TRUE(leftover_temporaries(p).empty());
}

TEST(TempRegistryTest, RegisteredTemporariesAreRemovedByTheSignalPath) {
  const fs::path d = fresh_dir("registry");
  const std::size_t before = minipipe::io::registered_temporary_count();
  {
    OutputFile f(d / "a.json", false);
    f.write("x", 1);
    EXPECT_EQ(minipipe::io::registered_temporary_count(), before + 1);
    EXPECT_EQ(minipipe::io::remove_registered_temporaries(), 1);  // what the handler does
    EXPECT_FALSE(fs::exists(f.temp_path()));
  }
  EXPECT_EQ(minipipe::io::registered_temporary_count(), before);  // unregistered on destruction
  OutputFile g(d / "b.json", false);
  g.commit();
  EXPECT_EQ(minipipe::io::registered_temporary_count(), before);  // and on commit
  EXPECT_EQ(minipipe::io::remove_registered_temporaries(), 0);
  EXPECT_TRUE(fs::exists(d / "b.json"));
}

TEST(OutputPathsTest, OutputsThatAreOneFileOrAnInputAreRefusedNamingBothKeys) {
  const fs::path d = fresh_dir("paths");
  const fs::path deck = d / "deck.toml";
  put(deck, "[train]\n");
  const std::string dump = (d / "d.h5").string();
  auto e = error_of([&] {
    check_outputs({{"output.dump", dump, false, true}, {"output.json", dump, false, false}}, {});
  });
  EXPECT_TRUE(contains(e, "'output.dump'") && contains(e, "'output.json'") && contains(e, "same output file")) << e;
  // The same (not yet existing) file spelled differently, and through a symlinked directory.
  e = error_of([&] { check_outputs({{"output.svg", dump, false, false}, {"output.trace", (d / "." / "d.h5")}}, {}); });
  EXPECT_TRUE(contains(e, "same output file")) << e;
  fs::create_directory_symlink(d, outdir() / "paths_alias");
  e = error_of([&] {
    check_outputs({{"output.svg", dump, false, false}, {"output.trace", (outdir() / "paths_alias" / "d.h5")}}, {});
  });
  EXPECT_TRUE(contains(e, "same output file")) << e;
  fs::remove(outdir() / "paths_alias");
  e = error_of([&] { check_outputs({{"output.json", deck.string(), true, false}}, {{"--deck", deck.string()}}); });
  EXPECT_TRUE(contains(e, "names the input of '--deck'")) << e;
  // Through a symlink to the deck, even with force.
  fs::create_symlink(deck, d / "r.json");
  e = error_of([&] {
    check_outputs({{"output.json", (d / "r.json").string(), true, false}}, {{"--deck", deck.string()}});
  });
  EXPECT_TRUE(contains(e, "names the input of '--deck'")) << e;
  // Distinct files pass.
  EXPECT_EQ(error_of([&] {
              check_outputs({{"output.dump", dump, false, true}, {"output.json", (d / "r2.json").string()}},
                            {{"--deck", deck.string()}, {"data.path", ""}});
            }),
            "");
}

TEST(OutputPathsTest, ExistingDirectoriesAndMissingDirectoriesAreRefused) {
  const fs::path d = fresh_dir("paths2");
  put(d / "old.json", "x");
  auto e = error_of([&] { check_outputs({{"output.json", (d / "old.json").string(), false, false}}, {}); });
  EXPECT_TRUE(contains(e, "the file exists; refusing to overwrite it without --force")) << e;
  EXPECT_EQ(error_of([&] { check_outputs({{"output.json", (d / "old.json").string(), true, false}}, {}); }), "");
  e = error_of([&] { check_outputs({{"output.svg", d.string(), true, false}}, {}); });
  EXPECT_TRUE(contains(e, "which is a directory")) << e;
  e = error_of([&] { check_outputs({{"output.svg", (d / "nope" / "t.svg").string(), true, false}}, {}); });
  EXPECT_TRUE(contains(e, "does not exist")) << e;
}

TEST(OutputPathsTest, LengthsAreCheckedAgainstNameMaxPathMaxAndMpiIo) {
  const fs::path d = fresh_dir("lengths");
  // A 250-byte name fits NAME_MAX (255) but not with the temporary's 11-byte suffix.
  const std::string long_name = (d / (std::string(250, 'a') + ".h5")).string();
  auto e = error_of([&] { check_outputs({{"output.json", long_name, false, false}}, {}); });
  EXPECT_TRUE(contains(e, "'output.json'") && contains(e, "NAME_MAX")) << e;
  // An MPI-IO path of 229 bytes is refused (OpenMPI aborts on names above 244 bytes).
  std::string p = d.string() + "/";
  p += std::string(229 - p.size() - 3, 'b') + ".h5";
  ASSERT_EQ(p.size(), 229u);
  e = error_of([&] { check_outputs({{"output.dump", p, false, true}}, {}); });
  EXPECT_TRUE(contains(e, "'output.dump'") && contains(e, "at most 228") && contains(e, "MPI-IO")) << e;
  p.erase(p.size() - 4, 1);  // 228 bytes: allowed
  EXPECT_EQ(error_of([&] { check_outputs({{"output.dump", p, false, true}}, {}); }), "");
  // A text output may be that long.
  p += "cc";
  EXPECT_EQ(error_of([&] { check_outputs({{"output.json", p, false, false}}, {}); }), "");
}

TEST(OutputPathsTest, InputsMustBeRegularFiles) {
  const fs::path d = fresh_dir("inputs");
  auto e = error_of([&] { check_input_file("--deck", d.string()); });
  EXPECT_TRUE(contains(e, "'--deck'") && contains(e, "which is a directory") && contains(e, "regular file")) << e;
  const fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  e = error_of([&] { check_input_file("pipeline.csv", fifo.string()); });
  EXPECT_TRUE(contains(e, "which is a FIFO")) << e;
  e = error_of([&] { check_input_file("data.path", "/dev/null"); });
  EXPECT_TRUE(contains(e, "character device")) << e;
  e = error_of([&] { check_input_file("data.path", (d / "missing\n.h5").string()); });
  EXPECT_TRUE(contains(e, "missing\\n.h5")) << e;  // non-printable bytes escaped
  put(d / "ok.toml", "");
  EXPECT_EQ(error_of([&] { check_input_file("--deck", (d / "ok.toml").string()); }), "");
}

// A run that stops in step 2 keeps steps 0 and 1: the unfinished step's group is removed, /meta
// says why, and the file carries the final name although step 2's rows were never all written.
TEST(DumpWriterStopTest, StoppedRunKeepsCompletedStepsAndRecordsWhy) {
  const fs::path d = fresh_dir("stopped");
  const fs::path p = d / "diverged.h5";
  {
    DumpWriter w(MPI_COMM_WORLD, p, false);
    for (int step = 0; step < 3; ++step) {
      const std::string g = "/step_000" + std::to_string(step);
      w.create_dataset(g + "/loss", {}, DType::f64);
      w.create_dataset(g + "/activations/layer_00", {4, 2}, DType::f32);
      const double loss = 4.0 - step;
      const float rows[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      if (step < 2) {
        w.write_rows(g + "/loss", 0, 1, &loss);
        w.write_rows(g + "/activations/layer_00", 0, 4, rows);
      } else {
        w.write_rows(g + "/activations/layer_00", 0, 1, rows);  // stopped mid-step
      }
    }
    w.close_stopped("NaN at element 3 of step 2 / stage 0 / layer_00 / micro-batch 0 / activation", 2, {"/step_0002"});
  }
  ASSERT_TRUE(fs::exists(p));
  EXPECT_TRUE(leftover_temporaries(p).empty());
  const DumpReader r(p);
  std::vector<std::string> names;
  for (const auto& ds : r.list_datasets({"/meta"})) names.push_back(ds.path);
  EXPECT_EQ(names, (std::vector<std::string>{"/step_0000/activations/layer_00", "/step_0000/loss",
                                             "/step_0001/activations/layer_00", "/step_0001/loss"}));
  EXPECT_EQ(r.int_attribute("/meta", "stopped_early"), 1);
  EXPECT_EQ(r.int_attribute("/meta", "completed_steps"), 2);
  EXPECT_TRUE(contains(r.string_attribute("/meta", "stop_reason"), "NaN at element 3 of step 2"));

  // Without discarding the unfinished step, the coverage check still refuses the file.
  const fs::path q = d / "incomplete.h5";
  DumpWriter w(MPI_COMM_WORLD, q, false);
  w.create_dataset("/step_0000/loss", {}, DType::f64);
  const std::string e = error_of([&] { w.close_stopped("stopped", 0, {}); });
  EXPECT_TRUE(contains(e, "/step_0000/loss") && contains(e, "never written")) << e;
  EXPECT_FALSE(fs::exists(q));
}

}  // namespace
