// Cell text of schedule actions in PyTorch's torch.distributed.pipelining spelling, both ways.
// Parsing is strict (whole cell must match) so a typo in a CSV schedule never runs silently.
#include "schedules/action.hpp"

#include <cctype>
#include <climits>

namespace minipipe::sched {

const char* op_name(Op op) {
  switch (op) {
    case Op::F:
      return "F";
    case Op::B:
      return "B";
    case Op::I:
      return "I";
    case Op::W:
      return "W";
    case Op::SEND_F:
      return "SEND_F";
    case Op::RECV_F:
      return "RECV_F";
    case Op::SEND_B:
      return "SEND_B";
    case Op::RECV_B:
      return "RECV_B";
    case Op::OVERLAP_F_B:
      return "OVERLAP_F_B";
  }
  return "?";
}

bool is_compute(Op op) {
  return op == Op::F || op == Op::B || op == Op::I || op == Op::W || op == Op::OVERLAP_F_B;
}

bool is_comm(Op op) {
  return op == Op::SEND_F || op == Op::RECV_F || op == Op::SEND_B || op == Op::RECV_B;
}

bool is_backward(Op op) {
  return op == Op::B || op == Op::I;
}

bool operator==(const Action& a, const Action& b) {
  return a.op == b.op && a.stage == b.stage && a.microbatch == b.microbatch && a.sub == b.sub;
}

std::string to_string(const Action& a) {
  if (a.op == Op::OVERLAP_F_B) {
    std::string s = "(";
    for (std::size_t k = 0; k < a.sub.size(); ++k) {
      if (k) s += ';';
      s += to_string(a.sub[k]);
    }
    return s + ")" + op_name(a.op);
  }
  return std::to_string(a.stage) + op_name(a.op) + std::to_string(a.microbatch);
}

namespace {

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

[[noreturn]] void bad_cell(const std::string& text, const std::string& why) {
  throw ScheduleError("invalid schedule cell '" + text + "': " + why +
                      "; allowed: <stage><op><microbatch> with op one of F, B, I, W, SEND_F, "
                      "RECV_F, SEND_B, RECV_B (e.g. 2I0, 0SEND_F1), or (<F cell>;<B or I "
                      "cell>)OVERLAP_F_B (e.g. (0F7;7B3)OVERLAP_F_B)");
}

// Reads a non-negative decimal at pos; false when there is none. Values above INT_MAX are
// rejected here so that later index arithmetic cannot overflow.
bool read_int(const std::string& s, std::size_t& pos, int& out, const std::string& text) {
  std::size_t start = pos;
  long long v = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    v = v * 10 + (s[pos] - '0');
    if (v > INT_MAX) bad_cell(text, "number too large");
    ++pos;
  }
  out = static_cast<int>(v);
  return pos > start;
}

Action parse_simple(const std::string& s, const std::string& text) {
  std::size_t pos = 0;
  int stage = 0;
  if (!read_int(s, pos, stage, text)) bad_cell(text, "it must start with the stage index");
  // Longest names first so "SEND_F" is not read as an unknown op.
  static const Op kOps[] = {Op::SEND_F, Op::RECV_F, Op::SEND_B, Op::RECV_B, Op::F, Op::B, Op::I, Op::W};
  for (Op op : kOps) {
    const std::string name = op_name(op);
    if (s.compare(pos, name.size(), name) == 0) {
      pos += name.size();
      int mb = 0;
      if (!read_int(s, pos, mb, text)) bad_cell(text, "the micro-batch index is missing");
      if (pos != s.size()) bad_cell(text, "unexpected text after the micro-batch index");
      return Action::make(op, stage, mb);
    }
  }
  bad_cell(text, "unknown or unsupported operation after the stage index");
}

}  // namespace

Action parse_action(const std::string& cell) {
  const std::string s = trim(cell);
  if (s.empty()) bad_cell(cell, "the cell is empty (an idle slot is not an action)");
  if (s[0] == '(') {
    const std::size_t close = s.find(')');
    if (close == std::string::npos) bad_cell(cell, "missing ')'");
    if (s.substr(close + 1) != op_name(Op::OVERLAP_F_B))
      bad_cell(cell, "a parenthesised pair must be followed by OVERLAP_F_B");
    const std::string inner = s.substr(1, close - 1);
    const std::size_t semi = inner.find(';');
    if (semi == std::string::npos || inner.find(';', semi + 1) != std::string::npos)
      bad_cell(cell, "OVERLAP_F_B holds exactly two actions separated by ';'");
    Action f = parse_simple(trim(inner.substr(0, semi)), cell);
    Action b = parse_simple(trim(inner.substr(semi + 1)), cell);
    if (f.op != Op::F || !is_backward(b.op))
      bad_cell(cell, "OVERLAP_F_B pairs a forward (F) with a backward (B or I), in that order");
    return Action::overlap(f, b);
  }
  return parse_simple(s, cell);
}

}  // namespace minipipe::sched
