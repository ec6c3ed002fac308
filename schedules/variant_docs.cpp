// The variant table as text: the names help text lists, `minipipe schedule --list` and the
// README's schedule table (which tests/schedules/test_variant_table.cpp compares with the README).
#include <sstream>

#include "schedules/variant.hpp"

namespace minipipe::sched {

namespace {

std::string joined_if(bool (*keep)(const VariantSpec&, int), int arg) {
  std::string out;
  for (const auto& spec : variant_table())
    if (keep(spec, arg)) out += (out.empty() ? "" : ", ") + std::string(spec.name);
  return out;
}

// "V, v = 2, I/W split", "looped, v >= 2", "v = 1": what the README's second column says.
std::string placement_text(const VariantSpec& spec) {
  std::string out = spec.placement == Placement::v ? "V, " : spec.v_rule == VRule::one ? "" : "looped, ";
  out += v_rule_text(spec.v_rule);
  if (spec.copies == 2) out += ", two model copies";
  if (spec.backward == Backward::split) out += ", I/W split";
  return out;
}

}  // namespace

std::string names_reading(Knob knob) {
  return joined_if([](const VariantSpec& s, int k) { return (s.knobs & static_cast<unsigned>(k)) != 0; }, knob);
}

std::string names_with_default_v(int v) {
  return joined_if([](const VariantSpec& s, int dv) { return s.default_v == dv; }, v);
}

std::string variant_list_text() {
  std::ostringstream out;
  for (const auto& spec : variant_table())
    out << spec.name << "\n    " << spec.limits << "\n    bubble: "
        << (*spec.formula ? spec.formula : "no closed form (list-scheduled; the simulator gives it)") << "\n";
  return out.str();
}

std::string variant_markdown_table() {
  std::ostringstream out;
  out << "| name | placement, v | bubble (closed form) | notes |\n|---|---|---|---|\n";
  for (const auto& spec : variant_table())
    out << "| `" << spec.name << "` | " << placement_text(spec) << " | " << spec.bubble_brief << " | " << spec.summary
        << " |\n";
  out << "| `csv:FILE` | any | simulated | a PyTorch-format CSV schedule (`pipeline.csv`) |\n";
  return out.str();
}

}  // namespace minipipe::sched
