// Checkpoint writing (collective, through DumpWriter: unique temporary, coverage check, atomic
// rename) and reading with manifest verification. The data cursor is the step count: a batch is a
// function of (seed, step), and initialization of (seed, name, index), so no other RNG state exists.
#include "miniapp/runtime/checkpoint.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "miniapp/io/dump_reader.hpp"
#include "miniapp/io/dump_writer.hpp"

namespace minipipe {

namespace {

constexpr const char* kFormat = "miniPipe checkpoint 1";

template <class T>
io::DType dtype() {
  return sizeof(T) == 4 ? io::DType::f32 : io::DType::f64;
}

// Test hook, for the kill -9 test only: MINIPIPE_FAULT_KILL_IN_CHECKPOINT=K kills rank 0 with
// SIGKILL during the K-th checkpoint write of the process, after the tensors and before the
// manifest, so the test sees what a crash in the middle of a write leaves behind.
void maybe_die_in_checkpoint() {
  static int count = 0;
  const char* k = std::getenv("MINIPIPE_FAULT_KILL_IN_CHECKPOINT");
  if (!k) return;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (++count == std::atoi(k) && rank == 0) std::raise(SIGKILL);
}

std::string all_text(MPI_Comm comm, const std::string& mine) {
  int p = 1;
  MPI_Comm_size(comm, &p);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm);
  int total = 0;
  for (int r = 0; r < p; ++r) displs[r] = total, total += lens[r];
  std::string all(static_cast<std::size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm);
  return all;
}

// The restart's metadata as the manifest records it: one "key value" line per /meta attribute a
// restart reads, in this order. Integers as decimal, first_loss as its exact bits (%a), texts
// (format, optimizer, deck, data) by their FNV-1a checksum.
const char* const kMetaInts[] = {"step",       "data_cursor", "seed",   "vocab",  "seq_len",
                                 "block_size", "channels",    "n_head", "n_layer"};
const char* const kMetaTexts[] = {"format", "optimizer", "deck", "data"};

std::string exact_text(double x) {
  char t[64];
  std::snprintf(t, sizeof(t), "%a", x);
  return t;
}

std::string text_checksum(const std::string& s) {
  return tensor_checksum(s.data(), s.size());
}

// The checksum that seals the manifest: its step, its metadata lines and its tensor lines.
std::string manifest_checksum(long long step, const std::string& meta, const std::string& tensors) {
  return text_checksum("step " + std::to_string(step) + "\n" + meta + tensors);
}

// The seed and model shape a checkpoint records in /meta: written from the run, checked on restart
// against the recorded deck. One list, so the writer and the reader cannot drift apart.
std::vector<std::pair<const char*, long long>> recorded_shape(long long seed, const ModelShape& s) {
  return {{"seed", seed},           {"vocab", s.vocab},   {"seq_len", s.seq_len}, {"block_size", s.block_size},
          {"channels", s.channels}, {"n_head", s.n_head}, {"n_layer", s.n_layer}};
}

}  // namespace

std::string tensor_checksum(const void* data, std::size_t bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto* b = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::vector<std::string> checkpoint_tensors(const std::string& param) {
  return {"/params/" + param, "/optimizer/m/" + param, "/optimizer/v/" + param};
}

template <class T>
void write_checkpoint(MPI_Comm job, const std::string& path, bool force, const std::vector<Stage<T>>& stages,
                      bool writes, long long completed_steps, const Deck& deck, const ModelShape& shape,
                      const std::string& data, double first_loss) {
  io::DumpWriter w(job, path, force);
  for (const auto& p : all_params(shape))
    for (const auto& name : checkpoint_tensors(p.name))
      w.create_dataset(name, {static_cast<std::uint64_t>(p.numel())}, dtype<T>());
  std::ostringstream lines;
  if (writes)
    for (const auto& s : stages) {
      if (s.copy() != 0) continue;  // a second model copy holds the same parameters and state
      for (const auto& p : s.params()) {
        const View1<T>* parts[] = {&p.value, &p.m, &p.v};
        const auto names = checkpoint_tensors(p.spec.name);
        for (int k = 0; k < 3; ++k) {
          auto h = Kokkos::create_mirror_view_and_copy(HostSpace(), *parts[k]);
          w.write_rows(names[k], 0, h.extent(0), h.data());
          lines << names[k] << ' ' << tensor_checksum(h.data(), h.extent(0) * sizeof(T)) << '\n';
        }
      }
    }
  maybe_die_in_checkpoint();
  const ModelShape& s = shape;
  const std::string& optimizer = deck.config().train.optimizer;
  auto ints = recorded_shape(deck.config().train.seed, s);
  ints.insert(ints.begin(), {{"step", completed_steps}, {"data_cursor", completed_steps}});
  for (const auto& [name, value] : ints) w.set_attribute("/meta", name, value);
  const std::pair<const char*, std::string> texts[] = {
      {"format", kFormat}, {"optimizer", optimizer}, {"deck", deck.effective_toml()}, {"data", data}};
  std::string meta;  // kMetaInts, then kMetaTexts, then first_loss (see above)
  for (const auto& [name, value] : ints) meta += std::string(name) + " " + std::to_string(value) + "\n";
  for (const auto& [name, value] : texts) meta += std::string(name) + " " + text_checksum(value) + "\n";
  meta += "first_loss " + exact_text(first_loss) + "\n";
  w.set_attribute("/meta", "format", kFormat);
  w.set_attribute("/meta", "optimizer", optimizer);
  w.set_attribute("/meta", "rng",
                  std::string("counter-based: init from (train.seed, name, index), data from "
                              "(train.seed, step); no state beyond seed and data_cursor"));
  w.set_attribute("/meta", "deck", deck.effective_toml());
  w.set_attribute("/meta", "data", data);
  w.set_attribute("/meta", "first_loss", first_loss);
  // The manifest last: every tensor's name and checksum, sorted, and the step they belong to.
  std::vector<std::string> entries;
  std::istringstream in(all_text(job, lines.str()));
  for (std::string line; std::getline(in, line);) entries.push_back(line);
  std::sort(entries.begin(), entries.end());
  std::string manifest;
  for (const auto& e : entries) manifest += e + '\n';
  w.set_attribute("/manifest", "step", completed_steps);
  w.set_attribute("/manifest", "tensors", manifest);
  // The metadata a restart reads, and one checksum over the whole manifest: a step, cursor, seed,
  // shape, deck or data changed afterwards (even in /meta and /manifest together) is refused.
  w.set_attribute("/manifest", "meta", meta);
  w.set_attribute("/manifest", "checksum", manifest_checksum(completed_steps, meta, manifest));
  w.close();
}

namespace {

// The manifest's metadata lines against /meta as it is now, line by line (naming the first that
// differs), then the manifest's own checksum; finally the ranges a restart relies on.
template <class Bad>
void check_metadata_of(const io::DumpReader& r, const Bad& bad) {
  const std::string recorded = r.string_attribute("/manifest", "meta");
  std::istringstream in(recorded);
  auto next = [&](const std::string& key, const std::string& now) {
    std::string line;
    if (!std::getline(in, line) || line.rfind(key + " ", 0) != 0)
      bad("has a manifest whose metadata does not list " + key + " where expected (the manifest was changed)");
    const std::string was = line.substr(key.size() + 1);
    if (was != now)
      bad("has /meta " + key + " = " + now + " but its manifest records " + was +
          " (metadata changed after the checkpoint was written)");
  };
  auto int_of = [&](const char* key) {
    try {
      return r.int_attribute("/meta", key);
    } catch (const std::exception&) {
      bad(std::string("has no integer /meta ") + key);
    }
    return 0LL;
  };
  for (const char* key : kMetaInts) next(key, std::to_string(int_of(key)));
  for (const char* key : kMetaTexts) {
    std::string text;
    try {
      text = r.string_attribute("/meta", key);
    } catch (const std::exception&) {
      bad(std::string("has no text /meta ") + key);
    }
    next(key, text_checksum(text));
  }
  double first_loss = 0;
  try {
    first_loss = r.double_attribute("/meta", "first_loss");
  } catch (const std::exception&) {
    bad("has no /meta first_loss");
  }
  next("first_loss", exact_text(first_loss));
  std::string rest;
  if (std::getline(in, rest)) bad("has a manifest with metadata it does not read (\"" + rest + "\")");
  const long long step = r.int_attribute("/manifest", "step");
  if (manifest_checksum(step, recorded, r.string_attribute("/manifest", "tensors")) !=
      r.string_attribute("/manifest", "checksum"))
    bad("has a manifest that does not match its own checksum (the manifest was changed after it was written)");
  // In range in their full 64 bits before anything narrows them (train.steps allows 1 .. 1000000).
  if (step < 1 || step > 1000000)
    bad("has /meta step = " + std::to_string(step) + "; allowed: 1 .. 1000000 (completed steps)");
  if (int_of("data_cursor") != step)
    bad("has /meta data_cursor = " + std::to_string(int_of("data_cursor")) + "; allowed: the step, " +
        std::to_string(step) + " (a batch is a function of the step)");
}

}  // namespace

Checkpoint::Checkpoint(const std::string& path, std::size_t real_bytes) : path_(path) {
  auto bad = [&](const std::string& why) {
    throw InputError("checkpoint.restart: " + path + " " + why + "; refusing to restart from it");
  };
  std::unique_ptr<io::DumpReader> r;
  try {
    r = std::make_unique<io::DumpReader>(path);
  } catch (const std::exception& e) {
    bad(std::string("cannot be read (") + e.what() + ")");
  }
  auto has = [&](const std::string& obj, const std::string& name) {
    try {
      const auto names = r->attribute_names(obj);
      return std::find(names.begin(), names.end(), name) != names.end();
    } catch (const std::exception&) {
      return false;
    }
  };
  if (!has("/meta", "format") || r->string_attribute("/meta", "format") != kFormat)
    bad("is not a miniPipe checkpoint (no /meta format \"" + std::string(kFormat) + "\")");
  if (!has("/manifest", "tensors") || !has("/manifest", "step"))
    bad("has no manifest (/manifest is written last: the write did not complete)");
  if (!has("/manifest", "meta") || !has("/manifest", "checksum"))
    bad("has no metadata checksum in its manifest (/manifest meta and checksum: written by an older miniPipe, "
        "whose metadata cannot be checked; write the checkpoint again)");
  step_ = r->int_attribute("/meta", "step");
  if (r->int_attribute("/manifest", "step") != step_)
    bad("has a manifest of step " + std::to_string(r->int_attribute("/manifest", "step")) +
        " but its tensors say step " + std::to_string(step_));
  check_metadata_of(*r, bad);
  deck_ = Deck::from_string(r->string_attribute("/meta", "deck"), path + " /meta deck");
  try {
    deck_.validate();  // every value in range before the shape below narrows any of them
  } catch (const InputError& e) {
    bad(std::string("holds a deck (/meta deck) that is not valid: ") + e.what());
  }
  // The recorded shape and seed are the deck's (a restart builds the model from the deck).
  const ModelShape s = model_shape_from_deck(deck_);
  for (const auto& [key, value] : recorded_shape(deck_.config().train.seed, s))
    if (r->int_attribute("/meta", key) != value)
      bad(std::string("has /meta ") + key + " = " + std::to_string(r->int_attribute("/meta", key)) +
          " but its deck gives " + std::to_string(value));
  if (!has("/meta", "data")) bad("records no training data (/meta data)");
  data_ = r->string_attribute("/meta", "data");
  // Older checkpoints lack it: a restart from one judges its loss from its own first step.
  if (has("/meta", "first_loss")) first_loss_ = r->double_attribute("/meta", "first_loss");

  std::istringstream in(r->string_attribute("/manifest", "tensors"));
  for (std::string line; std::getline(in, line);) {
    const auto sp = line.find(' ');
    if (sp == std::string::npos) bad("has a malformed manifest line \"" + line + "\"");
    checksums_[line.substr(0, sp)] = line.substr(sp + 1);
  }
  std::set<std::string> expected;
  for (const auto& p : all_params(model_shape_from_deck(deck_)))
    for (const auto& name : checkpoint_tensors(p.name)) expected.insert(name);
  for (const auto& name : expected)
    if (!checksums_.count(name)) bad("lists no " + name + " in its manifest (a model of another shape?)");
  std::size_t verified = 0;
  for (const auto& d : r->list_datasets({"/meta", "/manifest"})) {
    if (!checksums_.count(d.path)) bad("holds " + d.path + ", which its manifest does not list");
    if (d.value_class != io::ValueClass::floating || d.elem_size != real_bytes)
      bad("holds " + d.path + " as " + d.type_text + "; this build trains in " + (real_bytes == 8 ? "f64" : "f32") +
          " (a checkpoint of a float build restarts a float build, likewise double)");
    ++verified;
    std::vector<char> bytes(d.elements() * d.elem_size);
    r->read_rows(d, 0, d.rows(), bytes.data());
    if (tensor_checksum(bytes.data(), bytes.size()) != checksums_[d.path])
      bad("holds " + d.path +
          " whose checksum does not match its manifest (parts of different steps, or changed "
          "after it was written)");
  }
  if (verified != checksums_.size())
    bad("lists " + std::to_string(checksums_.size()) + " tensors in its manifest but holds " +
        std::to_string(verified));
  if (checksums_.size() != expected.size())
    bad("lists " + std::to_string(checksums_.size()) + " tensors in its manifest; the model has " +
        std::to_string(expected.size()));
}

namespace {

// The value `key` takes effect with: two spellings of one setting (model.block_size 0 and
// model.seq_len; data.min_len 0 and seq_len / 2) are the same training.
std::string effective_text(const Deck& d, const DeckKey& key) {
  if (key.name == "model.block_size") return std::to_string(model_shape_from_deck(d).block_size);
  if (key.name == "data.min_len" && d.config().data.source == "synthetic") {
    const long long T = d.config().model.seq_len, len = d.config().data.min_len;
    return std::to_string(std::clamp(len == 0 ? T / 2 : len, 1LL, T));
  }
  return to_text(key.field.get(d.config()));
}

// "0 (= 32)" where the spelling is not the effective value.
std::string shown(const Deck& d, const DeckKey& key) {
  const std::string spelled = to_text(key.field.get(d.config())), effective = effective_text(d, key);
  return spelled == effective ? spelled : spelled + " (= " + effective + ")";
}

}  // namespace

void Checkpoint::check_same_training(const Deck& deck, const std::string& data) const {
  // The keys whose change would train something else than the run a restart continues: the
  // rows flagged kRestartMatch, in table order (the first that differs is named).
  for (const auto& k : deck_keys()) {
    if (!(k.flags & kRestartMatch) || effective_text(deck, k) == effective_text(deck_, k)) continue;
    key_error(k.name, shown(deck, k), "the checkpoint's value (a restart continues the same training)",
              " but the checkpoint " + path_ + " was written with " + shown(deck_, k));
  }
  if (data != data_)
    key_error("data.path", "\"" + deck.config().data.path + "\"",
              "the same token data (the file may move, its tokens may not change)",
              " whose data (" + data + ") is not what the checkpoint " + path_ + " was trained on (" + data_ + ")");
  const long long steps = deck.config().train.steps;
  if (steps <= step_)
    key_error("train.steps", std::to_string(steps),
              "> " + std::to_string(step_) + " (train.steps counts every step, those before the restart included)",
              " but the checkpoint " + path_ + " already holds " + std::to_string(step_) + " completed steps");
}

template <class T>
void Checkpoint::load(std::vector<Stage<T>>& stages) const {
  io::DumpReader r(path_);
  for (auto& s : stages)
    for (auto& p : s.params()) {
      View1<T>* parts[] = {&p.value, &p.m, &p.v};
      const auto names = checkpoint_tensors(p.spec.name);
      for (int k = 0; k < 3; ++k) {
        std::vector<std::uint64_t> dims;
        std::vector<T> host;
        if constexpr (sizeof(T) == 4)
          host = r.read_f32(names[k], dims);
        else
          host = r.read_f64(names[k], dims);
        if (host.size() != parts[k]->extent(0))
          throw InputError("checkpoint.restart: " + path_ + " holds " + names[k] + " with " +
                           std::to_string(host.size()) + " elements; the model needs " +
                           std::to_string(parts[k]->extent(0)));
        if (tensor_checksum(host.data(), host.size() * sizeof(T)) != checksums_.at(names[k]))
          throw InputError("checkpoint.restart: " + path_ + " changed while the run read it (" + names[k] + ")");
        Kokkos::deep_copy(*parts[k], Kokkos::View<const T*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                                         host.data(), host.size()));
      }
    }
}

template void write_checkpoint<float>(MPI_Comm, const std::string&, bool, const std::vector<Stage<float>>&, bool,
                                      long long, const Deck&, const ModelShape&, const std::string&, double);
template void write_checkpoint<double>(MPI_Comm, const std::string&, bool, const std::vector<Stage<double>>&, bool,
                                       long long, const Deck&, const ModelShape&, const std::string&, double);
template void Checkpoint::load<float>(std::vector<Stage<float>>&) const;
template void Checkpoint::load<double>(std::vector<Stage<double>>&) const;

}  // namespace minipipe
