// Schedule IR atoms: the operations a pipeline rank performs and their PyTorch cell text.
// One Action is one cell of a torch.distributed.pipelining CSV schedule ("2I0", "0SEND_F1", ...).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace minipipe::sched {

// Every schedule problem (bad name, bad p/m/v, malformed CSV cell, invalid order) is reported
// with this one type, so the driver turns all of them into one message and a non-zero exit.
class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// F = forward, B = full backward, I = backward-input, W = backward-weight; the SEND/RECV
// actions are added by lower_communication; OVERLAP_F_B runs a forward and a backward of two
// different stages as one unit (DualPipe's computation-communication overlap).
enum class Op { F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, OVERLAP_F_B };

inline constexpr int kNumOps = 9;

const char* op_name(Op op);  // PyTorch's spelling: "F", "SEND_F", "OVERLAP_F_B"
bool is_compute(Op op);      // F, B, I, W, OVERLAP_F_B
bool is_comm(Op op);         // SEND_F, RECV_F, SEND_B, RECV_B
bool is_backward(Op op);     // B or I: the action that produces the input gradient

// An aggregate on purpose: Action{Op::F, 0, 3} reads like the cell "0F3".
struct Action {
  Op op = Op::F;
  int stage = -1;
  int microbatch = -1;
  std::vector<Action> sub;  // OVERLAP_F_B only: {forward, backward}; stage/microbatch are -1

  static Action make(Op op, int stage, int microbatch) { return Action{op, stage, microbatch, {}}; }
  static Action overlap(const Action& fwd, const Action& bwd) { return Action{Op::OVERLAP_F_B, -1, -1, {fwd, bwd}}; }
};

bool operator==(const Action& a, const Action& b);
inline bool operator!=(const Action& a, const Action& b) {
  return !(a == b);
}

// PyTorch cell text: "2I0", "0SEND_F1", "(0F7;7B3)OVERLAP_F_B".
std::string to_string(const Action& a);

// Inverse of to_string. Surrounding blanks are ignored; an empty cell is not an action (the
// caller treats it as idle). Throws ScheduleError naming the text and what is allowed.
Action parse_action(const std::string& cell);

}  // namespace minipipe::sched
