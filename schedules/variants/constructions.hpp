// The paper constructions that other generators reuse: 1F1B (merged into odd-p DualPipe), ZB-H1/H2
// and ZB-V (offered to the memory-capped searches), DualPipe's eight phases (DualPipeV, DualPipe).
#pragma once

#include <string>

#include "schedules/variants/rank_rows.hpp"

namespace minipipe::sched::gen {

Rankwise gen_1f1b(int p, int m);                                             // one_f_one_b.cpp
Rankwise gen_zero_bubble_h(const std::string& name, int p, int m, bool h2);  // zero_bubble_h.cpp
Rankwise gen_zbv(int p, int m);                                              // zb_v.cpp
// ZB-V at any m: below 2p-1 micro-batches the m = 2p-1 order restricted to m.
Rankwise gen_zbv_any_m(int p, int m);  // zb_v.cpp
// One rank's phases of DeepSeek's DualPipe family (dualpipev.cpp).
void dualpipe_rank(RankBuilder& rb, int first, int second, int half, int pos, int chunks);

}  // namespace minipipe::sched::gen
