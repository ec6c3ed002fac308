// CSV reading and writing of schedules, tolerant of what Python's csv module produces (CRLF
// line ends, quoted cells, a UTF-8 byte-order mark) and strict about every cell's contents.
#include "schedules/csv.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "schedules/simulator.hpp"
#include "schedules/validator.hpp"

namespace minipipe::sched {

namespace {

// Splits one CSV record. Quotes are honoured because csv.writer quotes any cell that holds
// a delimiter or quote, even though pipeline cells never need it.
std::vector<std::string> split_record(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t k = 0; k < line.size(); ++k) {
    const char c = line[k];
    if (quoted) {
      if (c == '"' && k + 1 < line.size() && line[k + 1] == '"') {
        cells.back() += '"';
        ++k;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

// The largest schedule a CSV may describe: the cells' indices are ints (parse_action refuses more
// than INT_MAX), but `largest + 1` must not overflow and the validator's tables hold stages x m
// entries, so a cell such as 2147483646F0 must be refused here, not allocated.
constexpr long long kMaxStages = 1 << 16;
constexpr long long kMaxMicrobatches = 1 << 20;
constexpr long long kMaxCells = 1LL << 25;  // stages x micro-batches

bool blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}

}  // namespace

Schedule read_csv(std::istream& in, int p_hint, Placement placement, const std::string& source) {
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (rows.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    rows.push_back(split_record(line));
  }
  // Trailing lines without any action are padding (an editor's final newline), not ranks.
  while (!rows.empty() && std::all_of(rows.back().begin(), rows.back().end(), blank)) rows.pop_back();
  if (rows.empty()) throw ScheduleError(source + ": the CSV schedule holds no actions");
  if (p_hint < 0) throw ScheduleError(source + ": p = " + std::to_string(p_hint) + " is not allowed; need p >= 1");
  const int p = p_hint > 0 ? p_hint : static_cast<int>(rows.size());
  if (static_cast<int>(rows.size()) > p)
    throw ScheduleError(source + ": the file has " + std::to_string(rows.size()) +
                        " rows (one per rank) but p = " + std::to_string(p));

  Schedule s;
  s.name = "csv:" + source;
  s.p = p;
  s.ranks.resize(p);
  int max_stage = -1, max_mb = -1;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < rows[r].size(); ++c) {
      if (blank(rows[r][c])) continue;
      Action a;
      try {
        a = parse_action(rows[r][c]);
      } catch (const ScheduleError& e) {
        throw ScheduleError(source + ": row " + std::to_string(r + 1) + ", column " + std::to_string(c + 1) + ": " +
                            e.what());
      }
      for (const Action& x : a.op == Op::OVERLAP_F_B ? a.sub : std::vector<Action>{a}) {
        const auto where = source + ": row " + std::to_string(r + 1) + ", column " + std::to_string(c + 1) +
                           ": cell '" + rows[r][c] + "' has ";
        if (x.stage >= kMaxStages)
          throw ScheduleError(where + "stage index " + std::to_string(x.stage) + "; allowed: 0 .. " +
                              std::to_string(kMaxStages - 1));
        if (x.microbatch >= kMaxMicrobatches)
          throw ScheduleError(where + "micro-batch index " + std::to_string(x.microbatch) + "; allowed: 0 .. " +
                              std::to_string(kMaxMicrobatches - 1));
        max_stage = std::max(max_stage, x.stage);
        max_mb = std::max(max_mb, x.microbatch);
      }
      s.ranks[r].push_back(std::move(a));
    }
  const int stages = max_stage + 1;
  if (static_cast<long long>(stages) * (max_mb + 1) > kMaxCells)
    throw ScheduleError(source + ": " + std::to_string(stages) + " stages x " + std::to_string(max_mb + 1) +
                        " micro-batches (largest indices + 1); allowed: at most " + std::to_string(kMaxCells) +
                        " (stage, micro-batch) pairs");
  if (stages % p != 0)
    throw ScheduleError(source + ": " + std::to_string(stages) +
                        " stages (largest stage index + 1) is not a multiple of p = " + std::to_string(p) +
                        " ranks; every rank must hold the same number of stages");
  s.v = stages / p;
  s.m = max_mb + 1;
  // Two model copies (DualPipe) when every even micro-batch stays on the first half of the
  // stages and every odd one on the second: a one-copy schedule runs micro-batch 0 through every
  // stage, so it never looks like this, and the validator holds either reading to completeness.
  bool two_copies = stages % 2 == 0 && stages >= 2;
  for (const auto& row : s.ranks)
    for (const auto& a : row)
      for (const Action& x : a.op == Op::OVERLAP_F_B ? a.sub : std::vector<Action>{a})
        two_copies = two_copies && x.stage / (stages / 2) == x.microbatch % 2;
  if (two_copies) s.chains = 2;
  if (placement == Placement::loop) {
    s.stage_to_rank = looped_placement(p, s.v);
  } else if (placement == Placement::v) {
    s.stage_to_rank = v_placement(p, s.v);
  } else {
    // The first row a stage appears on owns it; validate() flags any other row using it.
    s.stage_to_rank.assign(stages, -1);
    for (int r = 0; r < p; ++r)
      for (const auto& a : s.ranks[r])
        for (const Action& x : a.op == Op::OVERLAP_F_B ? a.sub : std::vector<Action>{a})
          if (s.stage_to_rank[x.stage] < 0) s.stage_to_rank[x.stage] = r;
    for (int st = 0; st < stages; ++st)
      if (s.stage_to_rank[st] < 0)
        throw ScheduleError(source + ": stage " + std::to_string(st) +
                            " appears in no cell, so its rank cannot be inferred; give "
                            "--placement loop or v");
  }
  validate(s);
  return s;
}

Schedule read_csv_file(const std::string& path, int p_hint, Placement placement) {
  std::ifstream in(path);
  if (!in) throw ScheduleError("cannot open CSV schedule '" + path + "'");
  return read_csv(in, p_hint, placement, path);
}

void write_csv(const Schedule& s, std::ostream& out, CsvLayout layout) {
  if (layout == CsvLayout::aligned) {
    for (const auto& row : step_grid(s)) {
      for (std::size_t k = 0; k < row.size(); ++k) out << (k ? "," : "") << (row[k] ? to_string(*row[k]) : "");
      out << '\n';
    }
    return;
  }
  for (const auto& row : s.ranks) {
    for (std::size_t k = 0; k < row.size(); ++k) out << (k ? "," : "") << to_string(row[k]);
    out << '\n';
  }
}

}  // namespace minipipe::sched
