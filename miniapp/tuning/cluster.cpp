// Cluster files (TOML, read with toml++ like decks): every key checked for type and range, unknown
// keys refused; rank placement by the chosen order; the ring and tree all-reduce closed forms.
#include "miniapp/tuning/cluster.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "miniapp/model/config.hpp"

namespace minipipe {

namespace {

// The documented ranges (docs/cluster.md): wide enough for any machine, narrow enough that every
// derived time stays finite and printable.
constexpr long long kMaxDevices = 1LL << 24;
constexpr double kMinRate = 1e-6;      // TFLOP/s, GiB, GB/s, speedup
constexpr double kMaxTflops = 1e6;     // also the largest speedup
constexpr double kMaxBandwidth = 1e9;  // GB/s; also the largest memory_gib
constexpr double kMaxLatencyUs = 1e9;  // 1000 s

// The allowed keys of each section and what each holds (for the error text).
const std::map<std::string, std::map<std::string, std::string>>& schema() {
  static const std::map<std::string, std::map<std::string, std::string>> s = {
      {"cluster",
       {{"name", "a string"},
        {"nodes", "an integer 1 .. 16777216"},
        {"devices_per_node", "an integer 1 .. 16777216"},
        {"rank_order", "\"any\" | \"dp-major\" | \"pp-major\""},
        {"allreduce", "\"ring\" | \"tree\" | \"hierarchical\""}}},
      {"device",
       {{"tflops", "a number 1e-06 .. 1e+06"},
        {"memory_gib", "a number 1e-06 .. 1e+09"},
        {"memory_bandwidth_gbs", "a number 1e-06 .. 1e+09"},
        {"speedup", "a number 1e-06 .. 1e+06"}}},
      {"link.intra",
       {{"latency_us", "a number 0 .. 1e+09"},
        {"bandwidth_gbs", "a number 1e-06 .. 1e+09"},
        {"from_costs", "a boolean"}}},
      {"link.inter",
       {{"latency_us", "a number 0 .. 1e+09"},
        {"bandwidth_gbs", "a number 1e-06 .. 1e+09"},
        {"from_costs", "a boolean"}}},
  };
  return s;
}

std::string sections_text() {
  std::string t;
  for (const auto& [sec, keys] : schema()) t += (t.empty() ? "" : ", ") + sec;
  return t;
}

std::string keys_text(const std::string& sec) {
  std::string t;
  for (const auto& [k, what] : schema().at(sec)) t += (t.empty() ? "" : ", ") + k;
  return t;
}

class Reader {
 public:
  Reader(const toml::table& t, const std::string& origin) : t_(t), origin_(origin) {}

  [[noreturn]] void fail(const std::string& key, const std::string& value, const std::string& allowed) const {
    throw InputError("cluster file " + origin_ + ": key '" + key + "' has value " + value + "; allowed: " + allowed);
  }
  [[noreturn]] void missing(const std::string& key, const std::string& allowed) const {
    throw InputError("cluster file " + origin_ + ": key '" + key + "' is missing; allowed: " + allowed);
  }
  const toml::node* node(const std::string& key) const { return t_.at_path(key).node(); }
  bool has(const std::string& key) const { return node(key) != nullptr; }

  std::string text(const std::string& key, const std::string& def) const {
    const toml::node* n = node(key);
    if (!n) return def;
    if (!n->is_string()) fail(key, shown(*n), "a string");
    return *n->value<std::string>();
  }
  bool flag(const std::string& key) const {
    const toml::node* n = node(key);
    if (!n) return false;
    if (!n->is_boolean()) fail(key, shown(*n), "true | false");
    return *n->value<bool>();
  }
  // An integer in [lo, hi], checked in the full 64 bits TOML gives it before any narrowing (a
  // devices_per_node of 2^32 + 2 must not run as 2).
  long long integer(const std::string& key, long long lo, long long hi) const {
    const std::string allowed = "an integer " + std::to_string(lo) + " .. " + std::to_string(hi);
    const toml::node* n = node(key);
    if (!n) missing(key, allowed);
    if (!n->is_integer()) fail(key, shown(*n), allowed);
    const long long v = *n->value_exact<std::int64_t>();
    if (v < lo || v > hi) fail(key, shown(*n), allowed);
    return v;
  }
  // A finite number (integer or float) in [lo, hi]; NaN when absent and not required. The bounds
  // keep every derived time finite and printable: a device.tflops of 4.9e-324 made every cost
  // infinite and 1e-300 printed 300-digit step times.
  double number(const std::string& key, double lo, double hi, bool required) const {
    char range[96];
    std::snprintf(range, sizeof(range), "a number %g .. %g", lo, hi);
    const std::string allowed = range;
    const toml::node* n = node(key);
    if (!n) {
      if (required) missing(key, allowed);
      return std::nan("");
    }
    if (!n->is_number()) fail(key, shown(*n), allowed);
    const double x = n->is_integer() ? static_cast<double>(*n->value<long long>()) : *n->value<double>();
    if (!std::isfinite(x) || x < lo || x > hi) fail(key, shown(*n), allowed);
    return x;
  }

 private:
  static std::string shown(const toml::node& n) {
    std::ostringstream os;
    n.visit([&](const auto& x) {
      if constexpr (toml::is_string<decltype(x)>)
        os << '"' << x.get() << '"';
      else if constexpr (toml::is_number<decltype(x)> || toml::is_boolean<decltype(x)>)
        os << x;
      else
        os << "a " << (n.is_table() ? "table" : n.is_array() ? "list" : "date/time");
    });
    return os.str();
  }
  const toml::table& t_;
  std::string origin_;
};

// Every section and key must be known: a misspelt key must not silently keep a default.
void refuse_unknown(const toml::table& t, const std::string& origin) {
  auto check_keys = [&](const std::string& sec, const toml::table& tbl) {
    for (const auto& [k, v] : tbl) {
      const std::string key(k.str());
      if (!schema().at(sec).count(key))
        throw InputError("cluster file " + origin + ": unknown key '" + sec + "." + key + "'; allowed in [" + sec +
                         "]: " + keys_text(sec));
    }
  };
  for (const auto& [k, v] : t) {
    const std::string sec(k.str());
    const toml::table* tbl = v.as_table();
    if (sec == "link" && tbl) {
      for (const auto& [lk, lv] : *tbl) {
        const std::string name = "link." + std::string(lk.str());
        if (!schema().count(name) || !lv.as_table())
          throw InputError("cluster file " + origin + ": unknown section '" + name +
                           "'; allowed: link.intra, link.inter");
        check_keys(name, *lv.as_table());
      }
      continue;
    }
    if (!schema().count(sec) || !tbl)
      throw InputError("cluster file " + origin + ": unknown section '" + sec + "'; allowed: " + sections_text());
    check_keys(sec, *tbl);
  }
}

Link read_link(const Reader& r, const std::string& sec, bool needed, bool& from_costs) {
  Link l;
  from_costs = r.flag(sec + ".from_costs");
  if (from_costs) {
    if (r.has(sec + ".latency_us") || r.has(sec + ".bandwidth_gbs"))
      r.fail(sec + ".from_costs", "true", "false when latency_us or bandwidth_gbs is given (one source per link)");
    return l;
  }
  if (!needed && !r.has(sec + ".latency_us") && !r.has(sec + ".bandwidth_gbs")) return l;
  l.latency_ms = r.number(sec + ".latency_us", 0, kMaxLatencyUs, true) / 1e3;
  l.ms_per_byte =
      1 / (r.number(sec + ".bandwidth_gbs", kMinRate, kMaxBandwidth, true) * 1e6);  // GB/s = 1e9 B/s = 1e6 B/ms
  return l;
}

}  // namespace

const char* to_string(RankOrder o) {
  return o == RankOrder::dp_major ? "dp-major" : "pp-major";
}
const char* to_string(AllReduceAlgo a) {
  return a == AllReduceAlgo::ring ? "ring" : a == AllReduceAlgo::tree ? "tree" : "hierarchical";
}

int Cluster::rank_of(int d, int pp, int p, int dp) const {
  return order == RankOrder::dp_major ? d * p + pp : pp * dp + d;
}

const Link& Cluster::link(int rank_a, int rank_b) const {
  return node_of_rank(rank_a) == node_of_rank(rank_b) ? intra : inter;
}

void Cluster::use_measured_link(double latency_ms, double ms_per_byte) {
  const Link measured{latency_ms, ms_per_byte};
  if (intra_from_costs) intra = measured;
  if (inter_from_costs) inter = measured;
}

Cluster parse_cluster(const std::string& text, const std::string& origin) {
  toml::table t;
  try {
    t = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "cluster file " << origin << ": not valid TOML at line " << e.source().begin.line << ", column "
       << e.source().begin.column << ": " << e.description();
    throw InputError(os.str());
  }
  refuse_unknown(t, origin);
  const Reader r(t, origin);
  Cluster c;
  c.origin = origin;
  c.name = r.text("cluster.name", origin);
  c.nodes = static_cast<int>(r.integer("cluster.nodes", 1, kMaxDevices));
  c.devices_per_node = static_cast<int>(r.integer("cluster.devices_per_node", 1, kMaxDevices));
  if (static_cast<long long>(c.nodes) * c.devices_per_node > kMaxDevices)
    r.fail("cluster.nodes", std::to_string(c.nodes),
           "nodes x devices_per_node <= 16777216 (devices_per_node is " + std::to_string(c.devices_per_node) + ")");
  const std::string order = r.text("cluster.rank_order", "any");
  if (order != "any" && order != "dp-major" && order != "pp-major")
    r.fail("cluster.rank_order", "\"" + order + "\"", "\"any\" | \"dp-major\" | \"pp-major\"");
  c.any_order = order == "any";
  c.order = order == "pp-major" ? RankOrder::pp_major : RankOrder::dp_major;
  const std::string ar = r.text("cluster.allreduce", "ring");
  if (ar != "ring" && ar != "tree" && ar != "hierarchical")
    r.fail("cluster.allreduce", "\"" + ar + "\"", "\"ring\" | \"tree\" | \"hierarchical\"");
  c.allreduce = ar == "ring" ? AllReduceAlgo::ring : ar == "tree" ? AllReduceAlgo::tree : AllReduceAlgo::hierarchical;
  c.memory_bytes = r.number("device.memory_gib", kMinRate, kMaxBandwidth, true) * 1073741824.0;
  const double tf = r.number("device.tflops", kMinRate, kMaxTflops, false);
  c.tflops = std::isnan(tf) ? 0 : tf;
  const double mb = r.number("device.memory_bandwidth_gbs", kMinRate, kMaxBandwidth, false);
  c.memory_bytes_per_ms = std::isnan(mb) ? 0 : mb * 1e6;
  const double sp = r.number("device.speedup", kMinRate, kMaxTflops, false);
  c.speedup = std::isnan(sp) ? 1 : sp;
  c.intra = read_link(r, "link.intra", c.devices_per_node > 1, c.intra_from_costs);
  c.inter = read_link(r, "link.inter", c.nodes > 1, c.inter_from_costs);
  return c;
}

Cluster read_cluster(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError("cluster file '" + path + "' cannot be read (missing or not readable); pass --cluster FILE");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_cluster(ss.str(), path);
}

double ring_allreduce_ms(int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) * link.transfer_ms(bytes / n);
}

double tree_allreduce_ms(int n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  int depth = 0;
  while ((1 << depth) < n) ++depth;
  return 2.0 * depth * link.transfer_ms(bytes);
}

AllReduceParts hierarchical_allreduce(int k, int g, double bytes, const Link& intra, const Link& inter) {
  AllReduceParts t;
  if (k > 1) t.intra_ms = 2.0 * (k - 1) * intra.transfer_ms(bytes / k);
  if (g > 1) t.inter_ms = 2.0 * (g - 1) * inter.transfer_ms(bytes / (static_cast<double>(k) * g));
  return t;
}

}  // namespace minipipe
