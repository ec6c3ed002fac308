// Test hooks that inject known causes of lost time into a run, so tests can check that the time
// budget (time_budget.hpp) puts each where it belongs. Off unless the environment sets them.
#pragma once

namespace minipipe {

// MINIPIPE_TEST_DELAY_FORWARD=<stage>:<microseconds>: every forward of that stage runs that much
// longer (a sleep inside the timed action: a slower stage). MINIPIPE_TEST_DELAY_SEND=<microseconds>:
// a sleep before every boundary send is posted (a slow link, seen by the consumer as a late
// arrival). Parsed once; a malformed value throws InputError naming the variable, the value and
// what is allowed (the run's up-front checks call this, so a bad value exits 2 before any step).
// MINIPIPE_TEST_DEFER_STAGED_POSTS=1: a staged send is posted at the next progress point as on a
// GPU (where the staging copy runs on a queue of its own) also on a host backend, so that the
// ordering a GPU build uses (deferred posts, posted before this rank blocks) runs in CPU tests.
struct TestDelays {
  int forward_stage = -1;  // -1: no forward delay
  double forward_us = 0, send_us = 0;
  bool defer_staged_posts = false;
};
const TestDelays& test_delays();

// The hooks the executor calls (no-ops when the variables are unset).
void delay_forward_for_test(int stage);
void delay_send_for_test();

}  // namespace minipipe
