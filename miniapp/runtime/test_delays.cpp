// Parsing of the delay test hooks and the sleeps themselves (host code; the executor calls them
// after the action's device work is fenced, so a sleep is wall time of the action or the send).
#include "miniapp/runtime/test_delays.hpp"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "miniapp/model/config.hpp"

namespace minipipe {

namespace {

// A whole number of microseconds in [0, 10^8] (100 s: anything longer is a mistake).
long long parse_us(const char* var, const std::string& value, const std::string& text, const char* allowed) {
  const auto bad = [&] {
    throw InputError("environment: variable " + std::string(var) + " has value \"" + value + "\"; allowed: " + allowed);
  };
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) bad();
  const long long us = std::strtoll(text.c_str(), nullptr, 10);
  if (us > 100000000) bad();
  return us;
}

TestDelays parse() {
  TestDelays d;
  if (const char* f = std::getenv("MINIPIPE_TEST_DELAY_FORWARD")) {
    const std::string value = f;
    const char* allowed = "<stage>:<microseconds>, both whole numbers >= 0 (microseconds up to 100000000)";
    const auto colon = value.find(':');
    if (colon == std::string::npos) parse_us("MINIPIPE_TEST_DELAY_FORWARD", value, "", allowed);
    d.forward_stage = static_cast<int>(parse_us("MINIPIPE_TEST_DELAY_FORWARD", value, value.substr(0, colon), allowed));
    d.forward_us =
        static_cast<double>(parse_us("MINIPIPE_TEST_DELAY_FORWARD", value, value.substr(colon + 1), allowed));
  }
  if (const char* s = std::getenv("MINIPIPE_TEST_DEFER_STAGED_POSTS")) {
    const std::string value = s;
    if (value != "0" && value != "1")
      throw InputError("environment: variable MINIPIPE_TEST_DEFER_STAGED_POSTS has value \"" + value +
                       "\"; allowed: 0 | 1");
    d.defer_staged_posts = value == "1";
  }
  if (const char* s = std::getenv("MINIPIPE_TEST_DELAY_SEND")) {
    const std::string value = s;
    d.send_us = static_cast<double>(
        parse_us("MINIPIPE_TEST_DELAY_SEND", value, value, "<microseconds>, a whole number 0 .. 100000000"));
  }
  return d;
}

void sleep_us(double us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long long>(us)));
}

}  // namespace

const TestDelays& test_delays() {
  static const TestDelays d = parse();
  return d;
}

void delay_forward_for_test(int stage) {
  const TestDelays& d = test_delays();
  if (stage == d.forward_stage) sleep_us(d.forward_us);
}

void delay_send_for_test() {
  sleep_us(test_delays().send_us);
}

}  // namespace minipipe
