// Synthetic corpus: a token follows from the previous two by a fixed rule, so a bigram model
// gets most of it and attention the rest; lengths vary and short sequences are right-padded.
#include "miniapp/model/data.hpp"

#include <cstdio>

#include <algorithm>
#include <numeric>

#include "miniapp/io/dump_reader.hpp"

namespace minipipe {

long long Batch::valid_tokens() const {
  long long n = 0;
  for (int t : targets) n += (t >= 0);
  return n;
}

DataSource::DataSource(const Deck& deck, const ModelShape& shape) : shape_(shape) {
  const DataConfig& data = deck.config().data;
  seed_ = static_cast<std::uint64_t>(deck.config().train.seed);
  const long long min_len = data.min_len;
  if (min_len < 0 || min_len > shape.seq_len)
    key_error("data.min_len", std::to_string(min_len), "0 .. model.seq_len (" + std::to_string(shape.seq_len) + ")");
  // Every sample has at least one valid target; 0 means half the sequence length.
  min_len_ = std::clamp(min_len == 0 ? shape.seq_len / 2 : static_cast<int>(min_len), 1, shape.seq_len);
  if (data.source != "hdf5") return;  // synthetic | hdf5: the row's rule (Deck::validate)
  from_file_ = true;
  const std::string& path = data.path;
  const std::string& dset = data.dataset;
  std::vector<std::uint64_t> dims;
  try {
    auto raw = io::read_i32(path, dset, dims);
    file_tokens_.assign(raw.begin(), raw.end());
  } catch (const std::exception& e) {
    throw InputError(std::string("deck: key 'data.path': ") + e.what());
  }
  if (dims.size() != 2 || dims[1] != static_cast<std::uint64_t>(shape.seq_len) + 1 || dims[0] == 0)
    key_error("data.dataset", "'" + dset + "'",
              "a non-empty int32 [N, model.seq_len+1] = [N, " + std::to_string(shape.seq_len + 1) + "] dataset",
              " in " + path);
  for (int t : file_tokens_)
    if (t < -1 || t >= shape.vocab)
      key_error("data.path", "'" + path + "'", "token ids in [-1, model.vocab)",
                ", whose token " + std::to_string(t) + " is outside [-1, model.vocab)");
  file_rows_ = dims[0];
}

std::string DataSource::fingerprint() const {
  if (!from_file_) return "synthetic";
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the tokens' int32 bytes
  for (int t : file_tokens_) {
    std::uint32_t u = static_cast<std::uint32_t>(t);
    for (int k = 0; k < 4; ++k, u >>= 8) h = (h ^ (u & 0xffu)) * 0x100000001b3ULL;
  }
  char text[96];
  std::snprintf(text, sizeof(text), "hdf5 tokens [%llu, %d], FNV-1a %016llx",
                static_cast<unsigned long long>(file_rows_), shape_.seq_len + 1, static_cast<unsigned long long>(h));
  return text;
}

void DataSource::check_every_batch_has_targets(long long first_step, long long steps, long long B,
                                               const std::string& path, const std::string& dataset) const {
  if (!from_file_ || steps <= first_step) return;  // synthetic samples all have min_len >= 1 targets
  const std::uint64_t N = file_rows_, T = static_cast<std::uint64_t>(shape_.seq_len);
  // Row r has a valid target at t when its tokens t and t+1 are both real (batch() above).
  std::vector<std::uint64_t> prefix(N + 1, 0);  // rows with a target among the first r
  for (std::uint64_t r = 0; r < N; ++r) {
    const int* row = &file_tokens_[r * (T + 1)];
    bool any = false;
    for (std::uint64_t t = 0; t < T && !any; ++t) any = row[t] >= 0 && row[t + 1] >= 0;
    prefix[r + 1] = prefix[r] + (any ? 1 : 0);
  }
  if (prefix[N] > 0 && static_cast<std::uint64_t>(B) >= N) return;  // every batch holds every row
  // Step s takes rows (s*B + i) mod N, i < B; its start repeats after N / gcd(B, N) steps.
  const std::uint64_t period =
      N / std::gcd(static_cast<std::uint64_t>(B) % N == 0 ? N : static_cast<std::uint64_t>(B) % N, N);
  const long long last = std::min<long long>(steps, first_step + static_cast<long long>(period));
  for (long long s = first_step; s < last; ++s) {
    const std::uint64_t start = (static_cast<std::uint64_t>(s) * static_cast<std::uint64_t>(B)) % N;
    const std::uint64_t len = std::min<std::uint64_t>(static_cast<std::uint64_t>(B), N);
    const std::uint64_t end = start + len;
    const std::uint64_t with = end <= N ? prefix[end] - prefix[start] : (prefix[N] - prefix[start]) + prefix[end - N];
    if (with == 0)
      key_error("data.path", "'" + path + "'",
                "a token file where every global batch has a row with two real tokens in a row",
                ": the global batch of step " + std::to_string(s) + " (rows " + std::to_string(start) + " .. " +
                    std::to_string((end - 1) % N) + " of dataset '" + dataset + "', train.batch = " +
                    std::to_string(B) + ") has no valid target (every target is -1 padding), so its loss would be 0/0");
  }
}

Batch DataSource::batch(int step, int B) const {
  Batch b;
  b.B = B;
  b.T = shape_.seq_len;
  const int T = shape_.seq_len, V = shape_.vocab;
  b.tokens.assign(static_cast<std::size_t>(B) * T, 0);
  b.targets.assign(static_cast<std::size_t>(B) * T, -1);
  for (int s = 0; s < B; ++s) {
    const std::uint64_t g = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(B) + s;
    int* tok = &b.tokens[static_cast<std::size_t>(s) * T];
    int* tgt = &b.targets[static_cast<std::size_t>(s) * T];
    if (from_file_) {
      const int* row = &file_tokens_[(g % file_rows_) * static_cast<std::size_t>(T + 1)];
      for (int t = 0; t < T; ++t) {
        tok[t] = row[t] < 0 ? 0 : row[t];
        tgt[t] = row[t] < 0 ? -1 : row[t + 1];
      }
      continue;
    }
    std::uint64_t st = mix64(seed_ ^ mix64(g + 0x51ed27ULL));
    auto next = [&st]() { return st = mix64(st); };
    const int len = min_len_ + static_cast<int>(next() % static_cast<std::uint64_t>(T - min_len_ + 1));
    // Sequence of len+1 tokens: x[t+1] = (5*x[t] + 3 + (x[t-1] & 1)) mod V.
    std::vector<int> seq(static_cast<std::size_t>(len) + 1);
    seq[0] = static_cast<int>(next() % V);
    seq[1] = static_cast<int>(next() % V);
    for (int t = 2; t <= len; ++t) seq[t] = static_cast<int>((5LL * seq[t - 1] + 3 + (seq[t - 2] & 1)) % V);
    for (int t = 0; t < T; ++t) {
      tok[t] = t < len ? seq[t] : 0;
      tgt[t] = t < len ? seq[t + 1] : -1;
    }
  }
  return b;
}

}  // namespace minipipe
