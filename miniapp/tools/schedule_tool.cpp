// `minipipe schedule`: options, then generate or load, validate, simulate, print and draw.
// All work is done by the schedules library; this file only wires flags to it.
#include "miniapp/tools/schedule_tool.hpp"

#include <CLI/CLI.hpp>
#include <functional>
#include <sstream>

#include "miniapp/io/output_file.hpp"
#include "miniapp/io/output_paths.hpp"
#include "miniapp/tools/command.hpp"
#include "schedules/schedules.hpp"

namespace minipipe {

namespace {

std::string names_joined() {
  std::string out;
  for (const auto& n : sched::schedule_names()) out += (out.empty() ? "" : " ") + n;
  return out;
}

}  // namespace

void ScheduleTool::attach(CLI::App& parent) {
  sub = parent.add_subcommand("schedule",
                              "generate (or load from CSV) a pipeline schedule, validate it, simulate it and draw it");
  sub->option_defaults()->always_capture_default();
  auto* o_sched = sub->add_option("--schedule,-s", schedule, "schedule variant: " + names_joined())
                      ->check(CLI::IsMember(sched::schedule_names()));
  auto* o_p = sub->add_option("-p", p, "pipeline ranks")->check(integer_at_least(1));
  auto* o_m = sub->add_option("-m", m, "micro-batches per optimizer step")->check(integer_at_least(1));
  auto* o_v = sub->add_option("-v", v,
                              "stages (model chunks) per rank; 0 = the schedule's default (2 for " +
                                  sched::names_with_default_v(2) + "; else 1)")
                  ->check(integer_at_least(0));
  auto* o_group = sub->add_option("--group", group,
                                  sched::names_reading(sched::kGroup) +
                                      ": micro-batches per group through the chunks; 0 = p "
                                      "(Megatron's depth-first), >= m = breadth-first")
                      ->check(integer_at_least(0));
  auto* o_cap = sub->add_option("--memory-cap", memory_cap,
                                sched::names_reading(sched::kMemoryCap) +
                                    ": stored micro-batches per rank; 0 = p (1F1B's); the list "
                                    "scheduling plans with --cost")
                    ->check(integer_at_least(0));
  sub->add_option("--cost", cost,
                  "time per micro-batch in ms of F, B or I/W, e.g. F=1,B=2 or F=1,I=1,W=1; per stage with "
                  "':' (F=8:20:10); overlap=<factor> scales an OVERLAP_F_B pair's F+B; B = I+W unless "
                  "given; only F given: B = 2F, I = W = F");
  sub->add_option("--comm", comm, "latency of one transfer between two ranks, ms")->check(CLI::NonNegativeNumber);
  sub->add_option("--csv", csv_out, "write the schedule as a PyTorch torch.distributed.pipelining CSV");
  sub->add_option("--csv-layout", csv_layout,
                  "compact (actions back to back), aligned (unit-step grid, empty cell = idle) or "
                  "comms (with SEND/RECV actions)")
      ->check(CLI::IsMember({"compact", "aligned", "comms"}));
  sub->add_option("--svg", svg_out, "write an SVG timeline of the simulated run");
  sub->add_option("--trace", trace_out, "write a Chrome-trace JSON of the simulated run (opens in Perfetto)");
  sub->add_option("--json", json_out, "write the simulated numbers as JSON");
  auto* o_load = sub->add_option("--load-csv", load_csv,
                                 "analyse a PyTorch CSV schedule instead of a generator (p, v, m come "
                                 "from the file)");
  sub->add_option("--placement", placement,
                  "stage placement of a loaded CSV: auto (from the rows), loop (stage s on rank s%p) "
                  "or v (rank r holds stages r and 2p-1-r)")
      ->check(CLI::IsMember({"auto", "loop", "v"}));
  sub->add_option("--grid", grid, "print the rank-by-step grid: auto (cut long grids), full or none")
      ->check(CLI::IsMember({"auto", "full", "none"}));
  sub->add_flag("--force", force, "overwrite existing output files");
  auto* o_list = sub->add_flag("--list", list, "name every schedule variant with its constraints and exit");
  sub->add_flag("--markdown", markdown, "with --list: print the README's schedule table instead")->needs(o_list);
  for (auto* o : {o_sched, o_p, o_m, o_v, o_group, o_cap}) o_load->excludes(o);
}

int ScheduleTool::run(std::ostream& out) {
  try {
    if (list) {
      out << (markdown ? sched::variant_markdown_table() : sched::variant_list_text());
      return 0;
    }
    // Outputs: distinct, not the loaded CSV, not existing unless --force, within length limits.
    if (!load_csv.empty()) io::check_input_file("--load-csv", load_csv);
    io::check_outputs({{"--csv", csv_out, force, false},
                       {"--svg", svg_out, force, false},
                       {"--trace", trace_out, force, false},
                       {"--json", json_out, force, false}},
                      {{"--load-csv", load_csv}});
    sched::Schedule s;
    if (!load_csv.empty()) {
      s = sched::read_csv_file(load_csv, 0, sched::parse_placement(placement));
    } else {
      sched::ScheduleOptions opt;
      opt.group = group;
      opt.memory_cap = memory_cap;
      // Sizes first: the cost tables below hold p*v entries.
      sched::check_schedule(schedule, p, m, v, opt);
      // The list-scheduled variants plan with the costs they are simulated with.
      const int stages = p * (v == 0 ? sched::default_v(schedule) : v);
      const sched::CostModel planned = sched::parse_costs(cost, stages, comm).resolved(stages, 1);
      opt.F = planned.F;
      opt.I = planned.I;
      opt.W = planned.W;
      opt.comm = comm;
      s = sched::make_schedule(schedule, p, m, v, opt);
      sched::validate(s);
    }
    const sched::CostModel costs = sched::parse_costs(cost, s.num_stages(), comm);
    const sched::SimResult result = sched::simulate(s, costs);
    const auto analytic = sched::analytic_bubble(s, costs);

    if (grid != "none") {
      const int columns = grid == "full" ? 1 << 30 : 96;
      out << "rank-by-step grid (unit steps, '.' = idle):\n" << sched::format_step_grid(s, columns) << "\n";
    }
    sched::write_summary(s, costs, result, analytic, out);

    if (!csv_out.empty()) {
      io::write_output_file(csv_out, force, [&](std::ostream& f) {
        if (csv_layout == "comms")
          sched::write_csv(sched::lower_communication(s), f);
        else
          sched::write_csv(s, f, csv_layout == "aligned" ? sched::CsvLayout::aligned : sched::CsvLayout::compact);
      });
      out << "wrote " << csv_out << "\n";
    }
    sched::Timeline tl = result.timeline;
    {
      std::ostringstream title;
      title << tl.title << "  bubble " << result.bubble_fraction;
      tl.title = title.str();
    }
    if (!svg_out.empty()) {
      io::write_output_file(svg_out, force, [&](std::ostream& f) { sched::write_svg(tl, f); });
      out << "wrote " << svg_out << "\n";
    }
    if (!trace_out.empty()) {
      io::write_output_file(trace_out, force, [&](std::ostream& f) { sched::write_chrome_trace(tl, f); });
      out << "wrote " << trace_out << "\n";
    }
    if (!json_out.empty()) {
      io::write_output_file(json_out, force,
                            [&](std::ostream& f) { sched::write_json(s, costs, result, analytic, f); });
      out << "wrote " << json_out << "\n";
    }
    return 0;
  } catch (const io::OutputError& e) {
    return print_error(*err, e.what(), kExitFailure);  // the input was fine; writing a result failed
  } catch (const std::exception& e) {
    return print_error(*err, e.what(), kExitUsage);
  }
}

}  // namespace minipipe
