// The kernel counters' table, JSON section and SVG roofline (kernel_report.hpp).
#include "miniapp/report/kernel_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "schedules/text.hpp"
#include "util/svg.hpp"

namespace minipipe {

using sched::Json;

// A number in the table and the SVG's labels: six significant digits.
std::string json_number(double x) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

double gflops(const counters::WorkStats& w) {
  return w.seconds > 0 ? w.flops / w.seconds / 1e9 : 0.0;
}

double gbytes_per_second(const counters::WorkStats& w) {
  return w.seconds > 0 ? w.bytes / w.seconds / 1e9 : 0.0;
}

namespace {

std::vector<std::pair<std::string, counters::WorkStats>> by_time(const KernelCounterReport& r) {
  std::vector<std::pair<std::string, counters::WorkStats>> rows(r.work.begin(), r.work.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  return rows;
}

std::string sync_line(const counters::SyncCounts& c) {
  char line[320];
  std::snprintf(line, sizeof(line),
                "fences %llu (+%llu inside Kokkos) | D2H %llu (%llu B) | H2D %llu (%llu B) | D2D %llu (%llu B) | "
                "H2H %llu (%llu B) | fills %llu | kernels %llu, reduces %llu | host syncs seen %llu",
                static_cast<unsigned long long>(c.fences), static_cast<unsigned long long>(c.kokkos_fences),
                static_cast<unsigned long long>(c.d2h), static_cast<unsigned long long>(c.d2h_bytes),
                static_cast<unsigned long long>(c.h2d), static_cast<unsigned long long>(c.h2d_bytes),
                static_cast<unsigned long long>(c.d2d), static_cast<unsigned long long>(c.d2d_bytes),
                static_cast<unsigned long long>(c.h2h), static_cast<unsigned long long>(c.h2h_bytes),
                static_cast<unsigned long long>(c.fills), static_cast<unsigned long long>(c.kernels),
                static_cast<unsigned long long>(c.reduces), static_cast<unsigned long long>(c.host_syncs));
  return line;
}

Json sync_json(const counters::SyncCounts& c) {
  Json j;
  j["fences"] = c.fences, j["kokkos_fences"] = c.kokkos_fences;
  j["d2h"] = c.d2h, j["d2h_bytes"] = c.d2h_bytes, j["h2d"] = c.h2d, j["h2d_bytes"] = c.h2d_bytes;
  j["d2d"] = c.d2d, j["d2d_bytes"] = c.d2d_bytes, j["h2h"] = c.h2h, j["h2h_bytes"] = c.h2h_bytes;
  j["fills"] = c.fills, j["fill_bytes"] = c.fill_bytes, j["kernels"] = c.kernels, j["reduces"] = c.reduces;
  j["host_syncs"] = c.host_syncs;
  return j;
}

}  // namespace

RoofSummary roof_summary(const KernelCounterReport& r) {
  RoofSummary s;
  const double sgemm = r.peaks.sgemm_gflops * 1e9, triad = r.peaks.triad_gbs * 1e9;
  if (sgemm <= 0 || triad <= 0) return s;
  s.ridge = sgemm / triad;
  double model = 0;
  for (const auto& [label, w] : r.work) {
    const double bound = std::max(w.flops / sgemm, w.bytes / triad);
    const bool compute = w.bytes <= 0 || w.flops >= s.ridge * w.bytes;
    (compute ? s.compute_bound : s.memory_bound) += bound;
    (compute ? s.compute_measured : s.memory_measured) += w.seconds;
    model += w.model_flops;
  }
  if (s.bound() > 0) s.model_over_sgemm_bound = model / s.bound() / sgemm;
  if (s.measured() > 0) s.model_over_sgemm_measured = model / s.measured() / sgemm;
  return s;
}

void print_kernel_report(const KernelCounterReport& r, std::ostream& out) {
  std::ostringstream os;
  double flops = 0, model = 0, seconds = 0;
  for (const auto& [k, w] : r.work) flops += w.flops, model += w.model_flops, seconds += w.seconds;
  os << "kernel counters (rank 0, " << r.steps << " step" << (r.steps == 1 ? "" : "s")
     << (r.timed ? ", each kernel fenced" : "") << "):\n";
  char line[256];
  std::snprintf(line, sizeof(line), "  %-40s %7s %10s %10s %10s %9s %9s %7s %6s\n", "kernel", "calls", "ms", "GFLOP",
                "MB", "GFLOP/s", "GB/s", "FLOP/B", "%time");
  os << line;
  for (const auto& [label, w] : by_time(r)) {
    std::snprintf(line, sizeof(line), "  %-40s %7llu %10.3f %10.4f %10.3f %9.2f %9.2f %7.2f %6.1f\n",
                  label.substr(0, 40).c_str(), static_cast<unsigned long long>(w.calls), 1e3 * w.seconds, w.flops / 1e9,
                  w.bytes / 1e6, gflops(w), gbytes_per_second(w), w.bytes > 0 ? w.flops / w.bytes : 0.0,
                  seconds > 0 ? 100.0 * w.seconds / seconds : 0.0);
    os << line;
  }
  std::snprintf(line, sizeof(line), "  %-40s %7s %10.3f %10.4f (model %.4f GFLOP = the FOM's)\n", "all", "",
                1e3 * seconds, flops / 1e9, model / 1e9);
  os << line;
  std::snprintf(line, sizeof(line),
                "  same run on %s: sgemm %.2f GFLOP/s (n = %d, %s), triad %.2f GB/s (%llu floats)\n",
                r.peaks.backend.c_str(), r.peaks.sgemm_gflops, r.peaks.sgemm_n, r.peaks.sgemm_library.c_str(),
                r.peaks.triad_gbs, static_cast<unsigned long long>(r.peaks.triad_elements));
  os << line;
  for (const counters::GemmProbe& g : r.peaks.sgemm_probes) {  // the slower GEMMs timed beside it
    if (g.library == r.peaks.sgemm_library) continue;
    std::snprintf(line, sizeof(line), "    beside it: %s %.2f GFLOP/s\n", g.library.c_str(), g.gflops);
    os << line;
  }
  const RoofSummary roof = roof_summary(r);
  if (roof.ridge > 0) {
    std::snprintf(line, sizeof(line),
                  "  at the roofline (each kernel at max(FLOP / sgemm, bytes / triad), ridge %.2f FLOP/B): %.3f ms, "
                  "measured %.3f: %.3f of the roof's rate\n",
                  roof.ridge, 1e3 * roof.bound(), 1e3 * roof.measured(),
                  roof.measured() > 0 ? roof.bound() / roof.measured() : 0.0);
    os << line;
    std::snprintf(line, sizeof(line),
                  "    above the ridge %.3f ms (measured %.3f), below %.3f ms (measured %.3f); model FLOP over the "
                  "same-run sgemm: %.3f at the roof, %.3f measured\n",
                  1e3 * roof.compute_bound, 1e3 * roof.compute_measured, 1e3 * roof.memory_bound,
                  1e3 * roof.memory_measured, roof.model_over_sgemm_bound, roof.model_over_sgemm_measured);
    os << line;
  }
  os << "  fences of rank 0 by label, per step:";
  for (const auto& [label, n] : r.fence_labels)
    os << " " << label << " " << json_number(r.run_steps > 0 ? static_cast<double>(n) / r.run_steps : 0.0) << ";";
  os << "\n";
  for (std::size_t rank = 0; rank < r.sync.size(); ++rank)
    if (!r.sync[rank].empty())
      os << "  syncs per step, rank " << rank << " (last step): " << sync_line(r.sync[rank].back()) << "\n";
  out << os.str();
}

std::string kernel_counters_json(const KernelCounterReport& r) {
  Json j;
  j["timed"] = r.timed, j["steps"] = r.steps, j["dw_exact_group"] = r.dw_exact_group;
  Json peaks;
  peaks["backend"] = r.peaks.backend, peaks["sgemm_gflops"] = r.peaks.sgemm_gflops, peaks["sgemm_n"] = r.peaks.sgemm_n;
  peaks["sgemm_library"] = r.peaks.sgemm_library;
  peaks["sgemm_probes"] = Json::array();
  for (const counters::GemmProbe& g : r.peaks.sgemm_probes) {
    Json gj;
    gj["library"] = g.library, gj["gflops"] = g.gflops;
    peaks["sgemm_probes"].push_back(gj);
  }
  peaks["triad_gbs"] = r.peaks.triad_gbs, peaks["triad_elements"] = r.peaks.triad_elements;
  j["peaks"] = peaks;
  const RoofSummary roof = roof_summary(r);
  Json rj;
  rj["ridge_flops_per_byte"] = roof.ridge;
  rj["compute_bound_seconds"] = roof.compute_bound, rj["compute_measured_seconds"] = roof.compute_measured;
  rj["memory_bound_seconds"] = roof.memory_bound, rj["memory_measured_seconds"] = roof.memory_measured;
  rj["model_over_sgemm_bound"] = roof.model_over_sgemm_bound;
  rj["model_over_sgemm_measured"] = roof.model_over_sgemm_measured;
  j["roofline"] = rj;
  j["kernels"] = Json::array();
  for (const auto& [label, w] : by_time(r)) {
    Json k;
    k["kernel"] = label, k["calls"] = w.calls, k["seconds"] = w.seconds, k["flops"] = w.flops;
    k["model_flops"] = w.model_flops, k["bytes"] = w.bytes, k["gflops"] = gflops(w);
    k["gbs"] = gbytes_per_second(w), k["flops_per_byte"] = w.bytes > 0 ? w.flops / w.bytes : 0.0;
    j["kernels"].push_back(k);
  }
  j["kokkos_kernels"] = Json::array();
  for (const auto& [label, k] : r.kokkos) {
    Json x;
    x["label"] = label, x["calls"] = k.calls, x["seconds"] = k.seconds, x["reduces"] = k.reduces;
    j["kokkos_kernels"].push_back(x);
  }
  j["fences_by_label"] = Json::object();
  for (const auto& [label, n] : r.fence_labels) j["fences_by_label"][label] = n;
  j["fences_by_label_steps"] = r.run_steps;
  j["sync_per_step"] = Json::array();
  for (std::size_t rank = 0; rank < r.sync.size(); ++rank) {
    Json x;
    x["rank"] = rank;
    x["steps"] = Json::array();
    for (const auto& c : r.sync[rank]) x["steps"].push_back(sync_json(c));
    j["sync_per_step"].push_back(x);
  }
  return sched::json_text(j);
}

void write_roofline_svg(const KernelCounterReport& r, std::ostream& out) {
  // Axes: intensity 2^-6 .. 2^10 FLOP/B, rate from the sgemm peak (or the fastest kernel) down
  // five decades (log scales).
  const double W = 900, H = 560, x0 = 80, y0 = 40, pw = 560, ph = 440;
  const double imin = std::log10(1.0 / 64), imax = std::log10(1024.0);
  double top = std::max(r.peaks.sgemm_gflops, 1e-3);
  for (const auto& [k, w] : r.work) top = std::max(top, gflops(w));
  const double rmax = std::ceil(std::log10(top)), rmin = rmax - 5;
  auto X = [&](double ai) { return x0 + pw * (std::log10(ai) - imin) / (imax - imin); };
  auto Y = [&](double g) {
    const double l = std::clamp(std::log10(std::max(g, 1e-30)), rmin, rmax);
    return y0 + ph * (rmax - l) / (rmax - rmin);
  };
  std::ostringstream o;
  util::SvgWriter svg(o, {"width", W}, {"height", H}, {{"font-family", "sans-serif"}, {"font-size", "11"}});
  svg.element("text", {{"x", x0}, {"y", "22"}, {"font-size", "14"}},
              "miniPipe kernel roofline (" + r.peaks.backend + ", same-run sgemm and triad)")
      .newline();
  svg.element("rect", {{"x", x0}, {"y", y0}, {"width", pw}, {"height", ph}, {"fill", "none"}, {"stroke", "black"}})
      .newline();
  for (int e = static_cast<int>(imin); e <= static_cast<int>(imax); ++e) {
    const double x = X(std::pow(10.0, e));
    if (x < x0 - 0.5) continue;
    svg.element("line", {{"x1", x}, {"y1", y0}, {"x2", x}, {"y2", y0 + ph}, {"stroke", "#ddd"}})
        .element("text", {{"x", x - 10}, {"y", y0 + ph + 16}}, "1e" + std::to_string(e))
        .newline();
  }
  for (int e = static_cast<int>(rmin); e <= static_cast<int>(rmax); ++e) {
    const double y = Y(std::pow(10.0, e));
    svg.element("line", {{"x1", x0}, {"y1", y}, {"x2", x0 + pw}, {"y2", y}, {"stroke", "#ddd"}})
        .element("text", {{"x", x0 - 40}, {"y", y + 4}}, "1e" + std::to_string(e))
        .newline();
  }
  svg.element("text", {{"x", x0 + pw / 2 - 80}, {"y", H - 40}}, "intensity (FLOP / byte moved)").newline();
  const double mid = y0 + ph / 2 + 40;
  svg.element("text", {{"x", "18"}, {"y", mid}, {"transform", "rotate(-90 18 " + util::number(mid) + ")"}}, "GFLOP/s")
      .newline();
  // The roof: min(sgemm, triad x intensity), sampled along the intensity axis.
  if (r.peaks.sgemm_gflops > 0 && r.peaks.triad_gbs > 0) {
    std::ostringstream points;
    for (int i = 0; i <= 200; ++i) {
      const double ai = std::pow(10.0, imin + (imax - imin) * i / 200.0);
      points << X(ai) << "," << Y(std::min(r.peaks.sgemm_gflops, r.peaks.triad_gbs * ai)) << " ";
    }
    svg.element("polyline", {{"fill", "none"}, {"stroke", "#c00"}, {"stroke-width", "2"}, {"points", points.str()}})
        .newline();
    svg.element("text", {{"x", x0 + pw - 200}, {"y", Y(r.peaks.sgemm_gflops) - 6}, {"fill", "#c00"}},
                "sgemm " + json_number(r.peaks.sgemm_gflops) + " GFLOP/s")
        .newline();
    svg.element("text", {{"x", x0 + 6}, {"y", Y(r.peaks.triad_gbs / 64) - 8}, {"fill", "#c00"}},
                "triad " + json_number(r.peaks.triad_gbs) + " GB/s")
        .newline();
  }
  // Kernel points, numbered; the legend on the right names them.
  int n = 0;
  for (const auto& [label, w] : by_time(r)) {
    if (w.flops <= 0 || w.bytes <= 0 || w.seconds <= 0) continue;
    ++n;
    const double x = X(std::clamp(w.flops / w.bytes, std::pow(10.0, imin), std::pow(10.0, imax)));
    const double y = Y(gflops(w));
    svg.open("circle", {{"cx", x}, {"cy", y}, {"r", "4"}, {"fill", "#06c"}})
        .element("title", {},
                 label + ": " + json_number(gflops(w)) + " GFLOP/s, " + json_number(w.flops / w.bytes) + " FLOP/B")
        .close("circle")
        .element("text", {{"x", x + 5}, {"y", y - 4}, {"fill", "#06c"}}, std::to_string(n))
        .newline();
    svg.element("text", {{"x", x0 + pw + 14}, {"y", y0 + 12 + 14 * (n - 1)}},
                std::to_string(n) + " " + label + " (" + json_number(std::round(gflops(w) * 100) / 100) + ")")
        .newline();
  }
  svg.finish();
  out << o.str();
}

}  // namespace minipipe
