// Deck parsing and validation: each bad value is rejected with a message that names the key,
// the value and what is allowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "miniapp/model/config.hpp"
#include "miniapp/model/data.hpp"
#include "miniapp/model/model.hpp"
#include "schedules/schedule.hpp"

using namespace minipipe;

namespace {

// The InputError message for a deck text (empty if it was accepted).
std::string error_of(const std::string& toml) {
  try {
    const Deck d = Deck::from_string(toml, "deck.toml");
    const ModelShape s = model_shape_from_deck(d);
    DataSource src(d, s);
    (void)src;
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(msg.empty()) << "input was accepted";
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' missing from: " << msg;
}

}  // namespace

TEST(Deck, DefaultsAreValidAndOverridesApply) {
  Deck d = Deck::from_string("[model]\nvocab = 128\n[pipeline]\nmicrobatches = [1, 2]\n", "x");
  EXPECT_EQ(d.config().model.vocab, 128);
  EXPECT_EQ(d.config().model.n_layer, 4);
  EXPECT_EQ(d.config().pipeline.microbatches, (std::vector<long long>{1, 2}));
  d.set_from_text("pipeline.schedule", "1f1b,gpipe");
  EXPECT_EQ(d.config().pipeline.schedule, (std::vector<std::string>{"1f1b", "gpipe"}));
  d.set_from_text("train.lr", "0.5");
  EXPECT_DOUBLE_EQ(d.config().train.lr, 0.5);
  EXPECT_NO_THROW(model_shape_from_deck(d));
}

// "all" stands for every schedule of the variant table, in its order (the table's own names, so
// that a new schedule needs no edit here), and for nothing else.
TEST(Deck, AllSchedulesIsEveryNameInTableOrder) {
  const std::vector<std::string> every = sched::schedule_names();
  ASSERT_GE(every.size(), 14u);
  EXPECT_EQ(every.front(), "sequential");
  const Deck d = Deck::from_string("[pipeline]\nschedule = \"all\"\n", "x");
  EXPECT_EQ(d.config().pipeline.schedule, every);
  Deck c;
  c.set_from_text("pipeline.schedule", "all");
  EXPECT_EQ(c.config().pipeline.schedule, every);
  c.set_from_text("pipeline.schedule", "1f1b,gpipe");
  EXPECT_EQ(c.config().pipeline.schedule, (std::vector<std::string>{"1f1b", "gpipe"}));
  expect_mentions(error_of("[pipeline]\nschedule = [\"all\", \"1f1b\"]\n"),
                  {"pipeline.schedule", "\"all\" alone", "allowed"});
}

TEST(Deck, UnknownKey) {
  expect_mentions(error_of("[model]\nvocabulary = 3\n"), {"model.vocabulary", "unknown"});
}

TEST(Deck, WrongType) {
  expect_mentions(error_of("[model]\nvocab = \"many\"\n"), {"model.vocab", "many", "integer"});
  expect_mentions(error_of("[train]\nlr = true\n"), {"train.lr", "true", "number"});
}

TEST(Deck, NegativeOrZeroSizes) {
  expect_mentions(error_of("[model]\nchannels = -8\n"), {"model.channels", "-8", "allowed"});
  expect_mentions(error_of("[model]\nn_layer = 0\n"), {"model.n_layer", "0", "allowed"});
}

TEST(Deck, ChannelsNotDivisibleByHeads) {
  expect_mentions(error_of("[model]\nchannels = 30\nn_head = 4\n"), {"model.channels", "30", "model.n_head"});
}

TEST(Deck, SequenceLongerThanPositionTable) {
  expect_mentions(error_of("[model]\nseq_len = 64\nblock_size = 32\n"), {"model.seq_len", "64", "block_size = 32"});
}

TEST(Deck, UnreadableFileAndBadToml) {
  try {
    Deck::from_file("/nonexistent/deck.toml");
    FAIL() << "missing deck accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/deck.toml"), std::string::npos);
  }
  expect_mentions(error_of("[model\nvocab = 3\n"), {"deck.toml", "line 1"});
}

TEST(Deck, CommandLineValuesAreTyped) {
  Deck d;
  try {
    d.set_from_text("model.vocab", "12x");
    FAIL();
  } catch (const InputError& e) {
    expect_mentions(e.what(), {"model.vocab", "12x", "integer"});
  }
  EXPECT_THROW(d.set_from_text("no.such", "1"), InputError);
}

// Each row is bound to its own field: a value set through the row's name reads back from that
// key alone, every other key keeping its default (a row bound to a neighbour's field fails).
TEST(Deck, EveryRowIsBoundToItsOwnField) {
  std::set<std::string> names;
  for (const auto& k : deck_keys()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " is listed twice";
    Deck d;
    DeckValue other;
    switch (k.def.index()) {
      case 0:
        other = std::get<long long>(k.def) + 7;
        break;
      case 1:
        other = std::get<double>(k.def) + 0.25;
        break;
      case 2:
        other = !std::get<bool>(k.def);
        break;
      case 3:
        other = std::get<std::string>(k.def) + "x";
        break;
      case 4: {
        auto l = std::get<std::vector<long long>>(k.def);
        l.push_back(3);
        other = l;
        break;
      }
      default: {
        auto l = std::get<std::vector<std::string>>(k.def);
        l.push_back("gpipe");
        other = l;
        break;
      }
    }
    std::string text = to_text(other);  // the command line's spelling: no quotes, no brackets
    text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return c == '"' || c == '[' || c == ']'; }),
               text.end());
    d.set_from_text(k.name, text);
    EXPECT_EQ(to_text(d.value(k.name)), to_text(other)) << k.name;
    for (const auto& j : deck_keys())
      if (j.name != k.name) {
        EXPECT_EQ(to_text(d.value(j.name)), to_text(j.def)) << k.name << " also set " << j.name;
      }
  }
  Deck d;
  d.set_from_text("pipeline.layers_per_stage", "auto");
  EXPECT_TRUE(d.config().pipeline.layers_per_stage.automatic);
  EXPECT_EQ(to_text(d.value("pipeline.layers_per_stage")), "\"auto\"");
  d.set_from_text("pipeline.layers_per_stage", "1,3");
  EXPECT_FALSE(d.config().pipeline.layers_per_stage.automatic);
  EXPECT_EQ(d.config().pipeline.layers_per_stage.counts, (std::vector<long long>{1, 3}));
}

// The keys a restart must keep are the rows flagged kRestartMatch: the model, the batch, the seed,
// the arithmetic, the optimizer with its settings and the data, in table order.
TEST(Deck, RestartKeysAreTheFlaggedRows) {
  std::vector<std::string> flagged;
  for (const auto& k : deck_keys())
    if (k.flags & kRestartMatch) flagged.push_back(k.name);
  const std::vector<std::string> want = {"model.vocab",  "model.seq_len",   "model.block_size",   "model.channels",
                                         "model.n_head", "model.n_layer",   "train.batch",        "train.seed",
                                         "train.mode",   "train.optimizer", "train.lr",           "train.beta1",
                                         "train.beta2",  "train.eps",       "train.weight_decay", "train.momentum",
                                         "data.source",  "data.dataset",    "data.min_len"};
  EXPECT_EQ(flagged, want);
  for (const auto& k : deck_keys()) EXPECT_TRUE(k.flags & kRun) << k.name << ": every key is run's";
}

// One message form for every refused key value.
TEST(Deck, KeyErrorNamesKeyValueAndWhatIsAllowed) {
  EXPECT_EQ(key_error_text("train.steps", "0", "1 .. 1000000"),
            "deck: key 'train.steps' has value 0; allowed: 1 .. 1000000");
  EXPECT_EQ(key_error_text("pipeline.dp", "3", "a divisor", " but 4 MPI ranks were launched", "command line"),
            "command line: key 'pipeline.dp' has value 3 but 4 MPI ranks were launched; allowed: a divisor");
  try {
    key_error("output.dump", "'x'", "a path");
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "deck: key 'output.dump' has value 'x'; allowed: a path");
  }
}

TEST(StageLayout, EvenAndExplicitSplits) {
  auto even = make_stage_layout(7, 3, {});
  EXPECT_EQ(even.count, (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(even.first, (std::vector<int>{0, 3, 5}));
  auto expl = make_stage_layout(7, 3, {1, 4, 2});
  EXPECT_EQ(expl.first, (std::vector<int>{0, 1, 5}));
  try {
    make_stage_layout(7, 3, {1, 4, 1});
    FAIL();
  } catch (const InputError& e) {
    expect_mentions(e.what(), {"layers_per_stage", "adds up to 6", "n_layer = 7"});
  }
  EXPECT_THROW(make_stage_layout(2, 3, {}), InputError);
}

// DualPipe's two model copies: one copy's split repeated; each copy has its own first stage
// (embedding) and last stage (head and loss), and stage s is part s % parts of copy s / parts.
TEST(StageLayout, ModelCopiesRepeatOneSplit) {
  const auto one = make_stage_layout(7, 3, {});
  EXPECT_EQ(one.num_parts(), 3);
  EXPECT_TRUE(one.is_first(0) && one.is_last(2) && !one.is_last(0) && one.copy_of(2) == 0);
  const auto two = model_copies(one, 2);
  EXPECT_EQ(two.num_stages(), 6);
  EXPECT_EQ(two.num_parts(), 3);
  EXPECT_EQ(two.count, (std::vector<int>{3, 2, 2, 3, 2, 2}));
  EXPECT_EQ(two.first, (std::vector<int>{0, 3, 5, 0, 3, 5}));
  std::vector<int> firsts, lasts, copies;
  for (int s = 0; s < 6; ++s) {
    if (two.is_first(s)) firsts.push_back(s);
    if (two.is_last(s)) lasts.push_back(s);
    copies.push_back(two.copy_of(s));
  }
  EXPECT_EQ(firsts, (std::vector<int>{0, 3}));
  EXPECT_EQ(lasts, (std::vector<int>{2, 5}));
  EXPECT_EQ(copies, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(two.part_of(4), 1);
}

TEST(Init, DependsOnSeedNameAndIndexOnly) {
  ModelShape s;
  s.vocab = 8, s.seq_len = 4, s.block_size = 4, s.channels = 4, s.n_head = 2, s.n_layer = 2;
  const auto params = all_params(s);
  const ParamSpec& w = params[2 + 2];  // layer_00/qkv_w
  ASSERT_EQ(w.name, "layer_00/qkv_w");
  EXPECT_EQ(init_value(1, w, 5), init_value(1, w, 5));
  EXPECT_NE(init_value(1, w, 5), init_value(2, w, 5));
  EXPECT_NE(init_value(1, w, 5), init_value(1, w, 6));
  // Mean ~0 and standard deviation ~0.02 over many elements.
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = init_value(3, w, i);
    sum += x, sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 1e-3);
}

TEST(SyntheticData, PaddingAndDeterminism) {
  Deck d;
  const ModelShape s = model_shape_from_deck(d);
  DataSource src(d, s);
  const Batch a = src.batch(3, 8), b = src.batch(3, 8);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  // Sample 5 of step 3 equals sample 5 whatever the batch it is drawn in (global index only).
  const Batch c = src.batch(0, 8 * 3 + 8);
  for (int t = 0; t < s.seq_len; ++t) EXPECT_EQ(a.tokens[5 * s.seq_len + t], c.tokens[(3 * 8 + 5) * s.seq_len + t]);
  // Right padding: once a target is -1 every later one in the sample is too; lengths vary.
  std::vector<int> lens;
  for (int i = 0; i < a.B; ++i) {
    int len = 0;
    bool padded = false;
    for (int t = 0; t < s.seq_len; ++t) {
      const int y = a.targets[i * s.seq_len + t];
      if (y < 0)
        padded = true;
      else {
        EXPECT_FALSE(padded) << "valid target after padding in sample " << i;
        ++len;
      }
    }
    lens.push_back(len);
  }
  EXPECT_NE(*std::min_element(lens.begin(), lens.end()), *std::max_element(lens.begin(), lens.end()));
  EXPECT_EQ(a.valid_tokens(), std::accumulate(lens.begin(), lens.end(), 0LL));
}
