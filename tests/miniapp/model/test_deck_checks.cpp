// Deck checks: empty list entries, decks that are not regular files, keys without
// effect in the chosen configuration, pipeline.timeout, escaped values and compact numbers, and
// the run's output names (sweeps included) checked against each other and against the inputs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "miniapp/io/message_text.hpp"
#include "miniapp/model/config.hpp"
#include "miniapp/model/deck_checks.hpp"

using namespace minipipe;
namespace fs = std::filesystem;

namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "input was accepted";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

fs::path scratch(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("minipipe_deck_checks_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(DeckChecks, EmptyListEntriesAreRefusedNotSkipped) {
  Deck d;
  expect_mentions(message_of([&] { d.set_from_text("pipeline.microbatches", "2,,4"); }),
                  {"pipeline.microbatches", "'2,,4'", "entry 2 is empty"});
  expect_mentions(message_of([&] { d.set_from_text("pipeline.schedule", "gpipe,"); }),
                  {"pipeline.schedule", "entry 2 is empty"});
  expect_mentions(message_of([&] { d.set_from_text("pipeline.microbatches", ",2"); }), {"entry 1 is empty"});
  d.set_from_text("pipeline.microbatches", "2, 4");
  EXPECT_EQ(d.config().pipeline.microbatches, (std::vector<long long>{2, 4}));
  d.set_from_text("pipeline.layers_per_stage", "");  // the whole list empty: the default
  EXPECT_TRUE(d.config().pipeline.layers_per_stage.counts.empty());
}

TEST(DeckChecks, DeckThatIsNotARegularFileIsRefused) {
  const fs::path dir = scratch("deck_kinds");
  expect_mentions(message_of([&] { Deck::from_file(dir.string()); }), {"--deck", "a directory", "regular"});
  const fs::path fifo = dir / "fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_mentions(message_of([&] { Deck::from_file(fifo.string()); }), {"--deck", "a FIFO"});  // and no hang
  expect_mentions(message_of([&] { Deck::from_file("/dev/null"); }), {"--deck", "a device"});
}

TEST(DeckChecks, ValuesAreEscapedAndNumbersCompact) {
  Deck d;
  expect_mentions(message_of([&] { d.set_from_text("model.vocab", "1\n2\x1b[31m"); }), {"'1\\n2\\x1B[31m'", "integer"});
  EXPECT_EQ(compact_number(0.1), "0.1");
  EXPECT_EQ(compact_number(5e-3), "0.005");
  EXPECT_EQ(compact_number(1e300), "1e+300");
  EXPECT_EQ(compact_number(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(compact_number(std::numeric_limits<double>::denorm_min()), "5e-324");
  EXPECT_EQ(quoted_text("it's"), "'it\\'s'");
}

TEST(DeckChecks, TimeoutIsCheckedAndDefaultsTo600) {
  Deck d;
  EXPECT_EQ(pipeline_timeout(d), 600.0);
  d.set_from_text("pipeline.timeout", "0");
  EXPECT_EQ(pipeline_timeout(d), 0.0);
  // Negative and non-finite values are the row's rule (Deck::validate), the upper bound this check's.
  for (const char* bad : {"-1", "nan", "inf"}) {
    d.set_from_text("pipeline.timeout", bad);
    expect_mentions(message_of([&] { d.validate(); }), {"pipeline.timeout", bad, ">= 0 (0 = wait forever)"});
  }
  d.set_from_text("pipeline.timeout", "1000001");
  EXPECT_NO_THROW(d.validate());
  expect_mentions(message_of([&] { pipeline_timeout(d); }), {"pipeline.timeout", "1000001", "[0, 1e6]"});
}

TEST(DeckChecks, KeysWithoutEffectAreRefusedNamingTheReason) {
  auto refused = [](const std::string& toml) {
    return message_of([&] {
      const Deck d = Deck::from_string(toml, "deck.toml");
      d.validate();  // each key's own rule first, as a run checks them
      check_effective_keys(d);
    });
  };
  expect_mentions(refused("[pipeline]\nplacement = \"v\"\n"), {"pipeline.placement", "'v'", "no effect", "csv"});
  expect_mentions(refused("[output]\nroofline = \"r.svg\"\n"),
                  {"output.roofline", "'r.svg'", "no effect", "profile.kernels = true"});
  EXPECT_EQ(refused("[output]\nroofline = \"r.svg\"\n[profile]\nkernels = true\n"), "");
  // Without the per-action fence a timeline would draw enqueue times: refused, the key named.
  expect_mentions(refused("[output]\nsvg = \"t.svg\"\n[profile]\naction_fence = false\n"),
                  {"output.svg", "'t.svg'", "no effect", "profile.action_fence = true"});
  expect_mentions(refused("[output]\ntrace = \"t.json\"\n[profile]\naction_fence = false\n"),
                  {"output.trace", "'t.json'", "profile.action_fence = true"});
  EXPECT_EQ(refused("[output]\nsvg = \"t.svg\"\n[profile]\naction_fence = true\n"), "");
  expect_mentions(refused("[pipeline]\nplacement = \"zigzag\"\n"), {"pipeline.placement", "zigzag", "loop | v"});
  expect_mentions(refused("[pipeline]\ncsv = \"a.csv\"\n"), {"pipeline.csv", "no effect"});
  expect_mentions(refused("[data]\npath = \"t.h5\"\n"), {"data.path", "data.source = 'synthetic'"});
  expect_mentions(refused("[data]\nsource = \"hdf5\"\npath = \"t.h5\"\nmin_len = 3\n"), {"data.min_len"});
  expect_mentions(refused("[train]\nmomentum = 0.9\n"), {"train.momentum", "0.9", "adamw"});
  expect_mentions(refused("[train]\noptimizer = \"sgd\"\nbeta1 = 0.8\n"), {"train.beta1", "0.8", "sgd"});
  expect_mentions(refused("[output]\ndump_level = \"loss\"\n"), {"output.dump_level", "output.dump"});
  expect_mentions(refused("[train]\nfast_gemm = \"blas\"\n"), {"train.fast_gemm", "'blas'", "deterministic", "fast"});
  expect_mentions(refused("[pipeline]\ngroup = 9\n"), {"pipeline.group", "9", "no effect", "interleaved-1f1b"});
  expect_mentions(refused("[pipeline]\nschedule = [\"1f1b\"]\nmemory_cap = 2\n"),
                  {"pipeline.memory_cap", "2", "no effect", "zb-mem"});
  // The same keys where they do take effect.
  EXPECT_EQ(refused("[pipeline]\nschedule = [\"csv\"]\ncsv = \"a.csv\"\nplacement = \"v\"\n"), "");
  EXPECT_EQ(refused("[train]\noptimizer = \"sgd\"\nmomentum = 0.9\n"), "");
  EXPECT_EQ(refused("[pipeline]\nschedule = [\"1f1b\", \"interleaved-1f1b\"]\ngroup = 8\n"), "");
  EXPECT_EQ(refused("[pipeline]\nschedule = [\"zb-mem\"]\nmemory_cap = 2\n"), "");
  EXPECT_EQ(refused("[train]\nmode = \"fast\"\nfast_gemm = \"blas\"\n"), "");
  EXPECT_EQ(refused("[output]\ndump = \"d.h5\"\ndump_level = \"loss\"\n"), "");
  EXPECT_EQ(refused(""), "");
}

TEST(DeckChecks, SweepOutputNamesAndCollisionsWithInputs) {
  Deck d;
  d.set_from_text("pipeline.schedule", "gpipe,1f1b");
  d.set_from_text("pipeline.microbatches", "2");
  d.set_from_text("output.dump", "out/d.h5");
  d.set_from_text("output.svg", "out/t.svg");
  d.set_from_text("output.trace", "out/tr");
  std::vector<std::string> names;
  for (const auto& o : planned_outputs(d))
    if (!o.path.empty()) names.push_back(o.key + "=" + o.path + (o.mpi_io ? " (mpi-io)" : ""));
  EXPECT_EQ(names,
            (std::vector<std::string>{"output.dump=out/d_gpipe_m2.h5 (mpi-io)", "output.svg=out/t_gpipe_m2.svg",
                                      "output.svg=out/t_gpipe_m2_budget.svg", "output.trace=out/tr_gpipe_m2.json",
                                      "output.dump=out/d_1f1b_m2.h5 (mpi-io)", "output.svg=out/t_1f1b_m2.svg",
                                      "output.svg=out/t_1f1b_m2_budget.svg", "output.trace=out/tr_1f1b_m2.json"}));

  const fs::path dir = scratch("collide");
  const std::string deck_path = (dir / "deck.toml").string();
  std::ofstream(deck_path) << "[train]\nsteps = 1\n";
  Deck e = Deck::from_file(deck_path);
  e.set_from_text("output.dump", (dir / "d.h5").string());
  e.set_from_text("output.json", (dir / "d.h5").string());
  expect_mentions(message_of([&] { check_run_files(e, deck_path); }), {"output.dump", "output.json", "same output"});
  e.set_from_text("output.json", deck_path);
  e.set_from_text("output.force", "true");
  expect_mentions(message_of([&] { check_run_files(e, deck_path); }), {"output.json", "input of '--deck'"});
  e.set_from_text("output.json", (dir / "r.json").string());
  EXPECT_EQ(message_of([&] { check_run_files(e, deck_path); }), "");
  fs::remove_all(dir.parent_path());
}
