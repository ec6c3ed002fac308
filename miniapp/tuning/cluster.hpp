// A cluster for the scaling model: nodes of devices, the link inside a node and the one between
// nodes, each device's compute rate and memory; where the p x dp ranks sit; all-reduce closed forms.
#pragma once

#include <string>
#include <vector>

namespace minipipe {

// One kind of link: a transfer of `bytes` takes latency_ms + bytes * ms_per_byte (the form of the
// cost file's ping-pong fit, so a measured link gives CostFile::transfer_ms to the bit).
struct Link {
  double latency_ms = 0, ms_per_byte = 0;
  double transfer_ms(double bytes) const { return latency_ms + bytes * ms_per_byte; }
  double gb_per_s() const { return ms_per_byte > 0 ? 1e-6 / ms_per_byte : 0.0; }
};

// Which ranks fill a node first. dp-major: rank = dp * p + pp, a replica's pipeline is
// consecutive (what `minipipe run` does, run.cpp). pp-major: rank = pp * dp + dp_index, the
// replicas of one stage are consecutive (their all-reduce stays inside a node).
enum class RankOrder { dp_major, pp_major };
// ring and tree run flat over the group's slowest link; hierarchical runs a ring inside each
// node and one across nodes (see hierarchical_allreduce).
enum class AllReduceAlgo { ring, tree, hierarchical };

const char* to_string(RankOrder o);
const char* to_string(AllReduceAlgo a);

struct Cluster {
  std::string name, origin;
  int nodes = 1, devices_per_node = 1;
  RankOrder order = RankOrder::dp_major;
  bool any_order = true;  // rank_order = "any" (the default): a sweep tries both orders
  AllReduceAlgo allreduce = AllReduceAlgo::ring;
  double tflops = 0;                                        // sustained rate of the model's kernels (analytic costs)
  double memory_bytes = 0;                                  // per device
  double memory_bytes_per_ms = 0;                           // per device, for the per-step optimizer and gradient work
  double speedup = 1;                                       // measured (cost file) times are divided by it
  Link intra, inter;                                        // inside one node; between nodes (per device: one NIC each)
  bool intra_from_costs = false, inter_from_costs = false;  // take the cost file's ping-pong

  int devices() const { return nodes * devices_per_node; }
  // The global rank of coordinates (dp index d, pipeline rank pp) of a p x dp layout.
  int rank_of(int d, int pp, int p, int dp) const;
  int node_of_rank(int rank) const { return rank / devices_per_node; }
  const Link& link(int rank_a, int rank_b) const;
  // The links marked from_costs get the cost file's measured latency and bandwidth.
  void use_measured_link(double latency_ms, double ms_per_byte);
};

// rank_order "dp-major" | "pp-major" fixes the order; "any" lets a sweep try both.
// Reads and checks a cluster file (TOML; docs/cluster.md). InputError naming the file, the key,
// the value and what is allowed; unknown keys and sections are refused.
Cluster read_cluster(const std::string& path);
Cluster parse_cluster(const std::string& text, const std::string& origin);

// Closed forms of an all-reduce of `bytes` over n members whose slowest link is `link`.
// Ring (reduce-scatter then all-gather): 2(n-1) steps of bytes/n each: 2(n-1)(latency + bytes/(n bw)).
// Tree (binary reduce then broadcast, whole message per hop): 2 ceil(log2 n)(latency + bytes/bw).
double ring_allreduce_ms(int n, double bytes, const Link& link);
double tree_allreduce_ms(int n, double bytes, const Link& link);

// A hierarchical all-reduce of `bytes` over k members on each of g nodes (n = k g), the time on each
// kind of link. Node-local ring reduce-scatter (k-1 steps of bytes/k over `intra`), then each of
// the k devices all-reduces its shard with its peers on the other nodes (a ring of g over `inter`,
// the k rings side by side, one NIC per device), then a node-local ring all-gather:
//   intra = 2 (k-1) (latency_intra + bytes / (k bw_intra)),
//   inter = 2 (g-1) (latency_inter + bytes / (k g bw_inter)).
// Against a flat ring over `inter`, 2 (kg-1) (latency + bytes / (kg bw)), the inter-node bytes fall
// k-fold (every device's NIC carries bytes/k), and the latency terms 2(g-1) instead of 2(kg-1).
struct AllReduceParts {
  double intra_ms = 0, inter_ms = 0;
  double total() const { return intra_ms + inter_ms; }
};
AllReduceParts hierarchical_allreduce(int k, int g, double bytes, const Link& intra, const Link& inter);

}  // namespace minipipe
