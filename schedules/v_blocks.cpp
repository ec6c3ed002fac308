// The V building-block search under a memory cap (Qi et al. 2024, "Pipeline Parallelism with
// Controllable Memory"), on a grid of unit time slots: one row per rank, one cell per slot.
#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "schedules/zb_orders.hpp"

namespace minipipe::sched {

namespace {

// Cell letters: F / f = forward of the rank's first / second chunk (stages r and 2p-1-r), B / b =
// input gradient of the second / first chunk (B runs down the ranks like F, b up like f), W / w =
// the weight pass of B / b. ' ' is an empty slot. A row's k-th letter of a kind is micro-batch k.
constexpr const char* kLetters = "FfBbWw";
enum { kF, kf, kB, kb, kW, kw };
constexpr int kSlots = 6;  // one building block: one slot per letter

using Grid = std::vector<std::string>;
using Counts = std::array<int, kSlots>;

// A step that cannot be carried out on this building block: the candidate is dropped.
struct Dropped {};
void need(bool ok) {
  if (!ok) throw Dropped{};
}

int letter(char c) {
  const char* at = c == 0 ? nullptr : std::strchr(kLetters, c);
  if (at == nullptr) throw Dropped{};
  return static_cast<int>(at - kLetters);
}
bool runs_up(char c) {  // f, b, w: the second chunk's forward and the first chunk's gradients
  return c == 'f' || c == 'b' || c == 'w';
}
bool stores(char c) {
  return c == 'F' || c == 'f';
}
bool frees(char c) {
  return c == 'W' || c == 'w';
}

int row_peak(const std::string& row) {
  int mem = 0, peak = 0;
  for (char c : row) {
    mem += stores(c) ? 1 : frees(c) ? -1 : 0;
    peak = std::max(peak, mem);
  }
  return peak;
}
int peak_of(const Grid& g) {
  int peak = 0;
  for (const auto& row : g) peak = std::max(peak, row_peak(row));
  return peak;
}

std::size_t equal_length(const Grid& g) {
  for (const auto& row : g) need(row.size() == g[0].size());
  return g[0].size();
}

// A block: for each letter its slot (0..5) within the block, one block per rank.
using Block = std::array<int, kSlots>;

// Puts W right after B and w right after b, at the first free slot cyclically.
void place_weights(Block& b) {
  std::array<bool, kSlots> used{};
  for (int k = 0; k < kSlots; ++k)
    if (b[k] >= 0) used[b[k]] = true;
  for (auto [from, to] : {std::pair{kB, kW}, std::pair{kb, kw}})
    for (int j = 0; j < kSlots; ++j) {
      const int pos = (b[from] + j) % kSlots;
      if (!used[pos]) {
        b[to] = pos, used[pos] = true;
        break;
      }
    }
}

// The blocks of ranks 1..p-1 from rank 0's: F and B move `shift` slots later per rank, f and b one
// slot earlier (rank r's block in rows below len0 uses shift0, the rest shift1). Empty when two
// letters of a rank would share a slot.
std::vector<Block> blocks_of(const Block& first, int shift0, int shift1, int len0, int p) {
  std::vector<Block> out{first};
  for (int i = 0; i + 1 < p; ++i) {
    const int shift = i < len0 ? shift0 : shift1;
    const std::array<int, 4> delta{shift, -1, shift, -1};  // F, f, B, b
    Block next{-1, -1, -1, -1, -1, -1};
    std::array<bool, kSlots> used{};
    for (int k = 0; k < 4; ++k) {
      const int pos = (out[i][k] + delta[k] + kSlots) % kSlots;
      if (used[pos]) return {};
      used[pos] = true;
      next[k] = pos;
    }
    place_weights(next);
    out.push_back(next);
  }
  return out;
}

// Each rank's block repeated; then the slots before a rank's first use of a letter and after
// its m-th are emptied. The first uses are found by walking the letters in dependency order
// (F down the ranks, f up, B down, b up) with one clock shared by all ranks.
Grid repeated(const std::vector<Block>& blocks, int m) {
  const int p = static_cast<int>(blocks.size());
  const std::size_t len = static_cast<std::size_t>(kSlots) * (4 * p + m + 1);
  Grid g(p);
  for (int i = 0; i < p; ++i) {
    std::string unit(kSlots, ' ');
    for (int k = 0; k < kSlots; ++k)
      if (blocks[i][k] >= 0) unit[blocks[i][k]] = kLetters[k];
    for (std::size_t k = 0; k < len; k += kSlots) g[i] += unit;
  }
  const auto clear = [&](int i, long long pos, int step) {
    for (; pos >= 0 && pos < static_cast<long long>(len); pos += step) g[i][pos] = ' ';
  };
  long long index = kSlots;
  for (char c : std::string("FfBb")) {
    for (int k = 0; k < p; ++k) {
      const int i = runs_up(c) ? p - 1 - k : k;
      for (int j = 0; j < kSlots; ++j) {
        need(index + kSlots <= static_cast<long long>(len));
        if (g[i][index] == c) {
          clear(i, index - kSlots, -kSlots);
          clear(i, index + static_cast<long long>(kSlots) * m, kSlots);
          ++index;
          if (c == 'B' || c == 'b') {
            const char w = c == 'B' ? 'W' : 'w';
            for (int d = 0; d < kSlots; ++d)
              if (g[i][index + d] == w) {
                clear(i, index + d - kSlots, -kSlots);
                clear(i, index + d + static_cast<long long>(kSlots) * m, kSlots);
                break;
              }
          }
          break;
        }
        ++index;
      }
    }
  }
  return g;
}

// Moves every letter to the earliest slot its rank and its inputs allow, keeping each rank's
// order: slot by slot, the downward letters rank 0 first, then the upward ones rank p-1 first.
void squeeze(Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  const std::size_t len = equal_length(g);
  Grid out(p, std::string(len, ' '));
  std::vector<Counts> count(p, Counts{});
  std::vector<Counts> at(static_cast<std::size_t>(p) * m, Counts{-1, -1, -1, -1, -1, -1});
  std::vector<int> next(p, 0);
  for (std::size_t j = 0; j < len; ++j)
    for (int dir = 0; dir < 2; ++dir)
      for (int k = 0; k < p; ++k) {
        const int i = dir == 0 ? k : p - 1 - k;
        const char c = g[i][j];
        if (c == ' ' || runs_up(c) != (dir == 1)) continue;
        const int id = letter(c), n = count[i][id];
        need(n < m);
        const auto mine = [&](int kind) { return at[static_cast<std::size_t>(n) * p + i][kind]; };
        int index;
        if (frees(c) || (i == 0 && (c == 'F' || c == 'B')) || (i == p - 1 && (c == 'f' || c == 'b'))) {
          if (i == 0 && c == 'B') need(mine(kf) >= 0);
          if (i == p - 1 && c == 'f') need(mine(kF) >= 0);
          if (i == p - 1 && c == 'b') need(mine(kB) >= 0);
          index = next[i];
        } else {
          const int from = c == 'F' || c == 'B' ? i - 1 : i + 1;
          const int d = at[static_cast<std::size_t>(n) * p + from][id];
          need(d >= 0);
          index = std::max(d + 1, next[i]);
        }
        need(static_cast<std::size_t>(index) < len);
        out[i][index] = c;
        count[i][id] = n + 1;
        at[static_cast<std::size_t>(n) * p + i][id] = index;
        next[i] = index + 1;
      }
  const int used = *std::max_element(next.begin(), next.end());
  for (auto& row : out) row.resize(static_cast<std::size_t>(used));
  g = std::move(out);
}

// Warm-up rebuilt before each rank's first b: first-chunk forwards, then F f pairs, then B W and
// a forward per step, with at most min(i+1, peak/2) second-chunk forwards before the first B.
void rebuild_warmup(Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  const int peak = std::min(peak_of(g), 2 * p);
  for (int i = 0; i < p; ++i) {
    const int want_ff = std::min({i + 1, peak / 2, m});
    const int want_f = std::min(peak - want_ff, m);
    std::string& row = g[i];
    int cf = 0, cff = 0, cb = 0, cw = 0;
    for (char& c : row) {
      if (c == 'b') break;
      if (c == 'F')
        ++cf;
      else if (c == 'f')
        ++cff;
      else if (c == 'B')
        ++cb;
      else if (c == 'W')
        ++cw;
      else
        need(c == ' ');
      c = ' ';
    }
    std::size_t j = static_cast<std::size_t>(i);
    int uf = 0, uff = 0, ub = 0, uw = 0;
    const auto put = [&](char c) {
      need(j < row.size());
      row[j] = c;
    };
    for (int k = 0; k < 2 * (p - 1 - i); ++k, ++j)
      if (uf < want_f && uf < cf) put('F'), ++uf;
    for (int k = 0; k < i + 1; ++k) {
      if (uf < want_f && uf < cf) put('F'), ++uf;
      ++j;
      if (uff < want_ff && uff < cff) put('f'), ++uff;
      ++j;
    }
    while (uf < cf || uff < cff || ub < cb || uw < cw) {
      if (ub < cb) put('B'), ++ub;
      ++j;
      if (uw < cw) put('W'), ++uw;
      ++j;
      if (uff < cff) {
        need(uff < uf);
        put('f'), ++uff;
      } else if (uf < cf) {
        put('F'), ++uf;
      }
      ++j;
    }
  }
}

// Drops each rank's letters past the m-th of their kind (the search runs at m >= 2p).
void keep_first(Grid& g, int m) {
  for (auto& row : g) {
    Counts n{};
    for (char& c : row)
      if (c != ' ' && n[letter(c)]++ >= m) c = ' ';
  }
}

// With few micro-batches the warm-up can hold more than it does: each rank's first weight passes
// move to the end until its peak reaches `peak`.
void release_warmup_weights(Grid& g, int peak) {
  const std::size_t len = equal_length(g);
  std::vector<int> peaks;
  for (const auto& row : g) peaks.push_back(row_peak(row));
  const int low = *std::min_element(peaks.begin(), peaks.end());
  for (std::size_t i = 0; i < g.size(); ++i) {
    std::string pad(static_cast<std::size_t>(std::max(0, peak - low)), ' ');
    std::size_t moved = 0;
    for (std::size_t j = 0; j < len; ++j) {
      if (peaks[i] + static_cast<int>(moved) >= peak) break;
      if (frees(g[i][j])) {
        need(moved < pad.size());
        pad[moved++] = g[i][j];
        g[i][j] = ' ';
      }
    }
    g[i] += pad;
  }
}

// Cool-down rebuilt after the last f: the last (peak+1)/2 b's and up to min(i+1, rest) B's of
// each rank are laid out two slots apart, aligned on rank 0's last f; the tail's weight passes
// go into the free slots after the last remaining one.
void rebuild_cooldown(Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  const int peak = peak_of(g);
  need(peak <= 2 * p);
  const int max_bb = std::min((peak + 1) / 2, m), max_b = std::min(peak - max_bb, m);
  long long start = -1;
  for (int i = 0; i < p; ++i) {
    std::string& row = g[i];
    int cb = 0, cbb = 0, cw = 0, cww = 0;
    long long last_ff = -1;
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j) {
      const char c = row[j];
      if (c == 'f' && last_ff == -1) last_ff = j;
      if (c == 'B' && cb < i + 1 && cb < max_b) row[j] = ' ', ++cb;
      if (c == 'b' && cbb < max_bb) row[j] = ' ', ++cbb;
    }
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j) {
      if (cw >= cb && cww >= cbb && cw + cww >= peak) break;
      if (row[j] == 'W') row[j] = ' ', ++cw;
      if (row[j] == 'w') row[j] = ' ', ++cww;
    }
    if (i == 0) start = last_ff;
    const auto slot = [&](long long index) -> char& {
      need(index >= 0 && index < static_cast<long long>(row.size()));
      return row[static_cast<std::size_t>(index)];
    };
    for (int k = 0; k < cbb; ++k) {
      char& c = slot(start - i + 2 * p - 2 * k);
      need(c == ' ');
      c = 'b';
    }
    for (int k = 0; k < cb; ++k) slot(start + 1 + i - 2 * k) = 'B';
  }
  std::size_t len = 0;
  for (auto& row : g) {
    int cw = 0, cww = 0;
    long long last_w = -1;
    for (long long j = static_cast<long long>(row.size()) - 1; j >= 0; --j)
      if (frees(row[j])) {
        last_w = j;
        break;
      }
    for (std::size_t j = 0; j < row.size(); ++j) {
      const char c = row[j];
      cw += c == 'B' ? 1 : c == 'W' ? -1 : 0;
      cww += c == 'b' ? 1 : c == 'w' ? -1 : 0;
      if (c == ' ' && static_cast<long long>(j) > last_w) {
        if (cw > 0)
          row[j] = 'W', --cw;
        else if (cww > 0)
          row[j] = 'w', --cww;
      }
    }
    row.append(static_cast<std::size_t>(std::max(cw, 0)), 'W');
    row.append(static_cast<std::size_t>(std::max(cww, 0)), 'w');
    len = std::max(len, row.size());
  }
  for (auto& row : g) row.resize(len, ' ');
  squeeze(g, m);
}

// Fills each empty slot, left to right, with the first later letter of its rank (at most one try
// per kind, the first of each) whose inputs are already placed before the slot and that does not
// raise the rank's peak memory.
void fill_gaps(Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  const int peak = peak_of(g);
  const std::size_t len = equal_length(g);
  std::vector<std::array<long long, kSlots>> last(p);
  for (int i = 0; i < p; ++i) {
    last[i].fill(-1);
    for (std::size_t j = 0; j < len; ++j)
      if (g[i][j] != ' ') last[i][letter(g[i][j])] = static_cast<long long>(j);
  }
  std::vector<int> mem(p, 0);
  std::vector<Counts> count(p, Counts{});
  std::vector<Counts> at(static_cast<std::size_t>(p) * m, Counts{-1, -1, -1, -1, -1, -1});
  const auto place = [&](int i, std::size_t j, char c) {
    const int id = letter(c), n = count[i][id];
    need(n < m);
    count[i][id] = n + 1;
    at[static_cast<std::size_t>(n) * p + i][id] = static_cast<int>(j);
    mem[i] += stores(c) ? 1 : frees(c) ? -1 : 0;
  };
  for (std::size_t j = 0; j < len; ++j)
    for (int i = 0; i < p; ++i) {
      if (g[i][j] != ' ') {
        place(i, j, g[i][j]);
        continue;
      }
      std::array<bool, kSlots> open{};
      int left = 0;
      for (int k = 0; k < kSlots; ++k) left += open[k] = last[i][k] > static_cast<long long>(j);
      int delta = 0, peak_delta = 0;
      for (std::size_t k = j + 1; k < len && left > 0; ++k) {
        const char c = g[i][k];
        delta += stores(c) ? 1 : frees(c) ? -1 : 0;
        const int before = peak_delta;
        peak_delta = std::max(peak_delta, delta);
        if (c == ' ' || !open[letter(c)]) continue;
        open[letter(c)] = false, --left;
        if (stores(c) && mem[i] + before >= peak) continue;
        const int n = count[i][letter(c)];
        const auto placed_before = [&](int rank, int kind) {
          const int x = at[static_cast<std::size_t>(n) * p + rank][kind];
          return x > -1 && x < static_cast<int>(j);
        };
        bool ok;
        if (c == 'F' || c == 'B')
          ok = i > 0 ? placed_before(i - 1, letter(c)) : c == 'F' || count[i][kf] > n;
        else if (c == 'f' || c == 'b')
          ok = i + 1 < p ? placed_before(i + 1, letter(c)) : count[i][c == 'f' ? kF : kB] > n;
        else
          ok = count[i][c == 'W' ? kB : kb] > n;
        if (!ok) continue;
        g[i][j] = c;
        g[i][k] = ' ';
        place(i, j, c);
        break;
      }
    }
}

// Each rank's weight passes take B's and b's kinds in the order those ran.
void relabel_weights(Grid& g, int m) {
  for (auto& row : g) {
    Counts n{};
    for (char c : row)
      if (c != ' ') ++n[letter(c)];
    for (int k = 0; k < kSlots; ++k) need(n[k] == m);
    std::string queue;
    std::size_t head = 0;
    for (char& c : row) {
      if (c == 'B') queue += 'W';
      if (c == 'b') queue += 'w';
      if (frees(c)) {
        need(head < queue.size());
        c = queue[head++];
      }
    }
    need(head == queue.size());
  }
}

// The grid's slots respect every dependency the authors check (same rank, or the neighbour
// the letter reads from, in an earlier slot).
bool consistent(const Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  std::vector<Counts> at(static_cast<std::size_t>(p) * m, Counts{-1, -1, -1, -1, -1, -1});
  for (int i = 0; i < p; ++i) {
    Counts n{};
    for (std::size_t j = 0; j < g[i].size(); ++j) {
      if (g[i][j] == ' ') continue;
      const int id = letter(g[i][j]);
      if (n[id] >= m) return false;
      at[static_cast<std::size_t>(n[id]++) * p + i][id] = static_cast<int>(j);
    }
    for (int k = 0; k < kSlots; ++k)
      if (n[k] != m) return false;
  }
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < m; ++j) {
      const auto x = [&](int rank, int kind) { return at[static_cast<std::size_t>(j) * p + rank][kind]; };
      for (int k = 0; k < kSlots; ++k)
        if (x(i, k) == -1) return false;
      if (x(i, kB) >= x(i, kW) || x(i, kb) >= x(i, kw)) return false;
      if (i == 0) {
        if (x(i, kf) >= x(i, kB)) return false;
      } else if (i == p - 1) {
        if (x(i, kF) >= x(i, kf) || x(i, kB) >= x(i, kb)) return false;
      } else if (x(i - 1, kF) >= x(i, kF) || x(i - 1, kB) >= x(i, kB) || x(i + 1, kf) >= x(i, kf) ||
                 x(i + 1, kb) >= x(i, kb)) {
        return false;
      }
    }
  return true;
}

// The order one building block leads to, or nullopt; `peak` is its peak (chunk-micro-batches),
// which the caller compares with the cap to stop trying longer first-shift runs.
std::optional<Grid> order_of(const std::vector<Block>& blocks, int m, int cap, int& peak) {
  const int p = static_cast<int>(blocks.size());
  const int wide = std::max(m, 2 * p);  // extra micro-batches keep the warm-up rules applicable
  Grid g = repeated(blocks, wide);
  int first_peak = peak = peak_of(g);
  if ((m == wide && first_peak > cap) || first_peak > 2 * p) return std::nullopt;
  squeeze(g, wide);
  rebuild_warmup(g, wide);
  squeeze(g, wide);
  peak = peak_of(g);
  if (peak > first_peak) {
    peak = first_peak;
    return std::nullopt;
  }
  if (m < wide) {
    keep_first(g, m);
    if (m <= p && 2 * m <= cap) release_warmup_weights(g, std::min(2 * p, peak));
    squeeze(g, m);
    first_peak = peak = peak_of(g);
    if (peak > cap) return std::nullopt;
  }
  rebuild_cooldown(g, m);
  fill_gaps(g, m);
  relabel_weights(g, m);
  peak = peak_of(g);
  if (peak > first_peak) {
    peak = first_peak;
    return std::nullopt;
  }
  if (!consistent(g, m)) return std::nullopt;
  return g;
}

Schedule to_schedule(const Grid& g, int m) {
  const int p = static_cast<int>(g.size());
  Schedule s;
  s.name = "v-blocks";
  s.p = p, s.v = 2, s.m = m;
  s.stage_to_rank = v_placement(p, 2);
  s.ranks.resize(p);
  for (int i = 0; i < p; ++i) {
    s.ranks[i].reserve(g[i].size());
    const int down = i, up = 2 * p - 1 - i;  // the rank's first and second chunk
    Counts n{};
    for (char c : g[i]) {
      if (c == ' ') continue;
      const int mb = n[letter(c)]++;
      const Op op = stores(c) ? Op::F : frees(c) ? Op::W : Op::I;
      // f is the second chunk's forward; B and W are the second chunk's backward (it runs first).
      const bool second = c == 'f' || c == 'B' || c == 'W';
      s.ranks[i].push_back(Action::make(op, second ? up : down, mb));
    }
  }
  return s;
}

}  // namespace

long long v_block_work(int p, int m) {
  const long long cells = 1LL * p * kSlots * (4LL * p + std::max(m, 2 * p) + 1);
  return 60LL * 15 * std::max(p - 1, 0) * cells * 8;  // blocks x grid x passes
}

namespace {

// Every distinct order the search reaches, each rank's letters without the empty slots.
std::vector<Grid> search(int p, int m, int cap_chunks) {
  std::vector<Grid> out;
  std::unordered_set<std::string> seen;  // many blocks lead to the same order
  const int cap = std::min(2 * p, cap_chunks);
  for (int ff = 1; ff < kSlots; ++ff)
    for (int b = 1; b < kSlots; ++b)
      for (int bb = 1; bb < kSlots; ++bb) {
        if (ff == b || ff == bb || b == bb) continue;
        Block first{0, ff, b, bb, -1, -1};
        place_weights(first);
        for (int s0 = 1; s0 <= 5; ++s0)
          for (int s1 = 1; s1 <= s0; ++s1)
            for (int len0 = 1; len0 < p; ++len0) {
              const std::vector<Block> blocks = blocks_of(first, s0, s1, len0, p);
              if (blocks.empty()) continue;
              int peak = 0;
              std::optional<Grid> g;
              try {
                g = order_of(blocks, m, cap, peak);
              } catch (const Dropped&) {
                continue;
              }
              if (peak > 2 * p || peak > cap_chunks) break;
              if (!g) continue;
              std::string key;
              for (auto& row : *g) {
                row.erase(std::remove(row.begin(), row.end(), ' '), row.end());
                key += row + '|';
              }
              if (seen.insert(std::move(key)).second) out.push_back(std::move(*g));
            }
      }
  return out;
}

}  // namespace

std::vector<Schedule> v_block_orders(int p, int m, int cap_chunks) {
  if (p < 2 || m < 1) return {};
  // The orders do not depend on the costs and caps above 2p act as 2p, so a grid or a sweep that
  // plans many costs at one (p, m, cap) searches once: the last few results are kept.
  using Key = std::array<int, 3>;
  static std::mutex lock;
  static std::deque<std::pair<Key, std::shared_ptr<const std::vector<Grid>>>> recent;
  const Key key{p, m, std::min(cap_chunks, 2 * p)};
  std::shared_ptr<const std::vector<Grid>> grids;
  {
    std::lock_guard<std::mutex> hold(lock);
    for (const auto& [k, g] : recent)
      if (k == key) grids = g;
  }
  if (!grids) {
    grids = std::make_shared<const std::vector<Grid>>(search(p, m, cap_chunks));
    std::lock_guard<std::mutex> hold(lock);
    recent.emplace_back(key, grids);
    if (recent.size() > 8) recent.pop_front();
  }
  std::vector<Schedule> out;
  out.reserve(grids->size());
  for (const Grid& g : *grids) out.push_back(to_schedule(g, m));
  return out;
}

}  // namespace minipipe::sched
