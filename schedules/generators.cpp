// make_schedule and its relatives: a name looked up in the variant table (variant_table.cpp), its
// arguments checked against the row, and the row's generator (schedules/variants/) run.
#include "schedules/program.hpp"
#include "schedules/schedule.hpp"
#include "schedules/variant.hpp"

namespace minipipe::sched {

const VariantSpec* find_variant_spec(const std::string& name) {
  for (const auto& spec : variant_table())
    if (name == spec.name) return &spec;
  return nullptr;
}

const VariantSpec& variant_spec(const std::string& name) {
  if (const VariantSpec* spec = find_variant_spec(name)) return *spec;
  std::string allowed;
  for (const auto& spec : variant_table()) allowed += std::string(allowed.empty() ? "" : ", ") + spec.name;
  throw ScheduleError("schedule = '" + name + "' is not allowed; allowed: " + allowed);
}

int full_warmup_m(const VariantSpec& spec, int p) {
  return spec.warmup_per_p * p + spec.warmup_plus;
}

std::string v_rule_text(VRule rule) {
  switch (rule) {
    case VRule::one:
      return "v = 1";
    case VRule::two:
      return "v = 2";
    case VRule::at_least_one:
      return "v >= 1";
    case VRule::at_least_two:
      return "v >= 2";
  }
  return "";
}

bool v_allowed(VRule rule, int v) {
  switch (rule) {
    case VRule::one:
      return v == 1;
    case VRule::two:
      return v == 2;
    case VRule::at_least_one:
      return v >= 1;
    case VRule::at_least_two:
      return v >= 2;
  }
  return false;
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& spec : variant_table()) out.emplace_back(spec.name);
  return out;
}

std::string constraints(const std::string& name) {
  return variant_spec(name).limits;
}

int default_v(const std::string& name) {
  return variant_spec(name).default_v;
}

int model_copies(const std::string& name) {
  return variant_spec(name).copies;
}

namespace {

[[noreturn]] void reject(const std::string& name, const std::string& key, long long value, const std::string& allowed) {
  throw ScheduleError("schedule '" + name + "': " + key + " = " + std::to_string(value) + " is not allowed; " +
                      allowed + " (" + constraints(name) + ")");
}

// Throws ScheduleError unless (name, p, m, v, opt) is allowed; v is the one the variant uses.
void check_arguments(const VariantSpec& spec, int p, int m, int v, const ScheduleOptions& opt) {
  const std::string name = spec.name;
  if (p < 1) reject(name, "p", p, "need p >= 1");
  if (m < 1) reject(name, "m", m, "need m >= 1");
  if (v < 1) reject(name, "v", v, "need v >= 1");
  // Bounds the memory a schedule takes (a few actions per stage and micro-batch).
  const long long cells = 1LL * p * v * m;
  if (cells > (1LL << 22)) reject(name, "p*v*m", cells, "need p*v*m <= 4194304");
  // The list scheduling wakes every waiting rank after each action: its time grows as p*v*m * p
  // (zb-mem at p = 512 ran for minutes at m = 8192, 17 s of CPU at m = 128), so the list-scheduled
  // variants stop at p*p*v*m = 2^23 (p = 512, m = 32; p = 16, v*m = 32768).
  if (cells * p > (1LL << 23) && spec.build == Build::list_scheduled)
    reject(name, "p*p*v*m", cells * p, "need p*p*v*m <= 8388608 for a list-scheduled schedule");
  if (!v_allowed(spec.v_rule, v))
    reject(name, "v", v,
           "need " + v_rule_text(spec.v_rule) + (*spec.v_note ? std::string(" (") + spec.v_note + ")" : ""));
  if (spec.knobs & kGroup) {
    const int group = opt.group == 0 ? p : opt.group;
    if (group < 1) reject(name, "group", group, "need group >= 1 micro-batches (0 = p)");
  }
  if ((spec.knobs & kMemoryCap) && opt.memory_cap < 0)
    reject(name, "memory_cap", opt.memory_cap, "need memory_cap >= 1 micro-batches (0 = p)");
}

Plan plan(const VariantSpec& spec, int p, int m, int v, const ScheduleOptions& opt) {
  if (v == 0) v = spec.default_v;
  check_arguments(spec, p, m, v, opt);
  const std::string name = spec.name;
  return spec.generate(VariantCall{name, p, m, v, opt});
}

}  // namespace

Schedule make_schedule(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  Plan planned = plan(variant_spec(name), p, m, v, opt);
  return planned.whole ? std::move(*planned.whole) : gen::build(planned.rows);
}

void check_schedule(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  const VariantSpec& spec = variant_spec(name);
  check_arguments(spec, p, m, v == 0 ? spec.default_v : v, opt);
}

bool built_rank_by_rank(const std::string& name) {
  return variant_spec(name).build == Build::rank_by_rank;
}

RankPrograms make_rank_programs(const std::string& name, int p, int m, int v, const ScheduleOptions& opt) {
  const Plan planned = plan(variant_spec(name), p, m, v, opt);
  return planned.whole ? to_programs(*planned.whole) : gen::programs(planned.rows);
}

}  // namespace minipipe::sched
