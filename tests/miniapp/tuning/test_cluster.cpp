// The cluster model against closed forms: each link's transfer time, which boundaries cross a
// node edge under each rank order, the ring and tree all-reduce, the pipeline with links charged,
// the all-reduce bytes the trainer moves, and bad cluster files refused naming key and value.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>

#include "kernels/exact_limbs.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/tuning/cluster.hpp"
#include "miniapp/tuning/scale_model.hpp"
#include "miniapp/tuning/tuner.hpp"
#include "schedules/schedules.hpp"

namespace mp = minipipe;
namespace ms = minipipe::sched;

namespace {

const char* kFourPerNode = R"(
[cluster]
name = "test"
nodes = 4
devices_per_node = 4
rank_order = "dp-major"
[device]
tflops = 10
memory_gib = 80
memory_bandwidth_gbs = 1000
[link.intra]
latency_us = 2
bandwidth_gbs = 100
[link.inter]
latency_us = 8
bandwidth_gbs = 10
)";

std::string refused(const std::string& text) {
  try {
    (void)mp::parse_cluster(text, "bad.toml");
  } catch (const mp::InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Cluster, TransferTimeOfEachLinkIsLatencyPlusBytesOverBandwidth) {
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  EXPECT_EQ(c.devices(), 16);
  const double bytes = 3.0e6;
  // 2 us + 3 MB at 100 GB/s = 0.002 + 0.03 ms; 8 us + 3 MB at 10 GB/s = 0.008 + 0.3 ms.
  EXPECT_NEAR(c.intra.transfer_ms(bytes), 0.032, 1e-12);
  EXPECT_NEAR(c.inter.transfer_ms(bytes), 0.308, 1e-12);
  EXPECT_EQ(&c.link(0, 3), &c.intra);
  EXPECT_EQ(&c.link(3, 4), &c.inter);
}

TEST(Cluster, RankOrderDecidesWhichBoundariesCrossANode) {
  mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  const double bytes = 1e6, in = c.intra.transfer_ms(bytes), out = c.inter.transfer_ms(bytes);
  // p = 8, one replica: ranks 0..7 fill nodes 0 and 1; boundary 3 (rank 3 -> 4) leaves the node.
  const auto s8 = ms::make_schedule("gpipe", 8, 4);
  EXPECT_EQ(mp::boundary_ms(c, s8.stage_to_rank, 8, 1, 0, bytes), (std::vector<double>{in, in, in, out, in, in, in}));
  // p = 3, dp = 4, dp-major (rank = d * 3 + pp): replica 1 holds ranks 3, 4, 5 across nodes 0 | 1.
  const auto s3 = ms::make_schedule("1f1b", 3, 4);
  EXPECT_EQ(mp::boundary_ms(c, s3.stage_to_rank, 3, 4, 0, bytes), (std::vector<double>{in, in}));
  EXPECT_EQ(mp::boundary_ms(c, s3.stage_to_rank, 3, 4, 1, bytes), (std::vector<double>{out, in}));
  // p = 2, dp = 8, pp-major (rank = pp * 8 + d): stage 0 on nodes 0-1, stage 1 on nodes 2-3.
  c.order = mp::RankOrder::pp_major;
  const auto s2 = ms::make_schedule("1f1b", 2, 4);
  for (int d = 0; d < 8; ++d) EXPECT_EQ(mp::boundary_ms(c, s2.stage_to_rank, 2, 8, d, bytes), std::vector<double>{out});
  // ZB-V's V placement puts stages 1 and 2 of p = 2 on rank 1: no transfer there.
  c.order = mp::RankOrder::dp_major;
  const auto v = ms::make_schedule("zb-v", 2, 4);
  EXPECT_EQ(mp::boundary_ms(c, v.stage_to_rank, 2, 1, 0, bytes), (std::vector<double>{in, 0.0, in}));
}

TEST(Cluster, PipelineBubbleWithLinksChargedIsTheClosedForm) {
  // GPipe over two nodes (p = 8): (m+p-1)(F+B) + 2 (6 intra + 1 inter) transfers.
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  const double F = 1.5, B = 3, bytes = 4e6;
  for (int m : {1, 4, 16}) {
    const auto s = ms::make_schedule("gpipe", 8, m);
    auto cm = ms::CostModel::uniform(8, F, B, 0, 0, 0);
    cm.boundary = mp::boundary_ms(c, s.stage_to_rank, 8, 1, 0, bytes);
    const auto r = ms::simulate(s, cm);
    const double links = 2 * (6 * c.intra.transfer_ms(bytes) + c.inter.transfer_ms(bytes));
    const double span = (m + 7) * (F + B) + links;
    EXPECT_DOUBLE_EQ(r.makespan, span) << "m=" << m;
    EXPECT_DOUBLE_EQ(r.bubble_fraction, 1 - m * (F + B) / span) << "m=" << m;
  }
}

TEST(Cluster, RingAndTreeAllReduceClosedForms) {
  const mp::Link l{0.005, 1 / 25e6};  // 5 us, 25 GB/s
  // Ring: 2(n-1) steps, each a latency and bytes/n: n = 8, 8 MB: 14 (0.005 + 1e6 / 25e6) ms.
  EXPECT_NEAR(mp::ring_allreduce_ms(8, 8e6, l), 14 * (0.005 + 0.04), 1e-12);
  // Large n: the bandwidth term tends to 2 bytes / bandwidth.
  EXPECT_NEAR(mp::ring_allreduce_ms(4096, 8e6, l) - 2 * 4095 * 0.005, 2 * 8e6 / 25e6, 1e-3);
  // Tree: ceil(log2 n) levels up and down, the whole message each: n = 5 -> 3 levels.
  EXPECT_NEAR(mp::tree_allreduce_ms(5, 8e6, l), 6 * (0.005 + 0.32), 1e-12);
  EXPECT_EQ(mp::ring_allreduce_ms(1, 8e6, l), 0.0);
  EXPECT_EQ(mp::tree_allreduce_ms(1, 8e6, l), 0.0);
}

TEST(Cluster, AllReduceCountsTheTrainersLimbBytes) {
  // The full exact accumulator is ExactLimbs::kLimbs int64 words (trainer.cpp); the compact form
  // the model assumes by default moves 16 bytes; fast mode one float.
  EXPECT_EQ(mp::allreduce_bytes_per_element(true, 32), double(mp::ExactLimbs::kLimbs * sizeof(std::int64_t)));
  EXPECT_EQ(mp::allreduce_bytes_per_element(true, mp::kCompactExactBytes), 16.0);
  EXPECT_EQ(mp::allreduce_bytes_per_element(false, 32), 4.0);
  // p = 1, dp = 2 on two one-device nodes: every parameter crosses the inter-node link once each way.
  const mp::Cluster c = mp::parse_cluster(R"(
[cluster]
nodes = 2
devices_per_node = 1
[device]
tflops = 10
memory_gib = 80
memory_bandwidth_gbs = 1000
[link.inter]
latency_us = 8
bandwidth_gbs = 10
)",
                                          "two.toml");
  mp::ModelShape shape{64, 16, 32, 4, 2, 16};
  double numel = 0;
  for (const auto& p : mp::all_params(shape)) numel += double(p.numel());
  for (bool det : {true, false})
    for (double exact : {32.0, 16.0})
      for (auto timing : {mp::AllReduceTiming::after, mp::AllReduceTiming::overlapped}) {
        const mp::CostFile costs = mp::analytic_costs(shape, 8, det, c);
        mp::ScaleOptions opt;
        opt.global_batch = 8;
        opt.schedules = {"sequential"};
        opt.exact_bytes = exact;
        opt.timing = timing;
        const auto best = mp::best_layouts(costs, c, 2, opt, 50);
        bool seen = false;
        for (const auto& x : best)
          if (x.p == 1 && x.dp == 2 && x.v == 1) {
            seen = true;
            const double ar = mp::ring_allreduce_ms(2, numel * (det ? exact : 4), c.inter);
            EXPECT_DOUBLE_EQ(x.allreduce_ms, ar);
            // One stage: its reduction starts at the step's last action, so nothing overlaps: the
            // exposed communication is the whole all-reduce and the loss agreement (12 B a sample).
            EXPECT_NEAR(x.exposed_comm_ms, ar + mp::tree_allreduce_ms(2, 12 * 8, c.inter), 1e-9);
          }
        EXPECT_TRUE(seen);
      }
}

// Each stage's gradients are complete when its last B or W ends: 1F1B at p = 2, m = 2, F = 1,
// B = 2 runs rank 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; rank 1: F0 [1,2] B0 [2,4] F1 [4,5]
// B1 [5,7]. One rank, two chunks (interleaved, p = 1, v = 2, m = 1): F on chunk 0 [0,1], chunk 1
// [1,2], B on chunk 1 [2,4], chunk 0 [4,6].
TEST(Cluster, StageGradientsReadyAtTheirLastBackward) {
  const auto cm = ms::CostModel::uniform(2, 1, 2, 0, 0, 0);
  EXPECT_EQ(mp::stage_gradients_ready(ms::make_rank_programs("1f1b", 2, 2), cm), (std::vector<double>{9, 7}));
  const auto one = ms::make_rank_programs("interleaved-1f1b", 1, 1, 2);
  ASSERT_EQ(one.num_stages(), 2);
  EXPECT_EQ(mp::stage_gradients_ready(one, cm), (std::vector<double>{6, 4}));
  // Split backward (ZB-H1: I then W): W finishes the gradients; the last rank end is the step's.
  const auto zb = ms::make_rank_programs("zb-h1", 2, 4);
  const auto cz = ms::CostModel::uniform(2, 1, 0, 1, 1, 0);
  const auto ready = mp::stage_gradients_ready(zb, cz);
  const auto totals = ms::simulate_totals(zb, cz);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ready[r], totals.end[r]) << "rank " << r;
}

// The overlapped all-reduce: a rank's reductions run one after another, each from when its stage
// is ready. Chunks ready at 4 (stage 1) and 6 (stage 0) on one rank:
//   reductions of 1.5 and 1: stage 1 [4, 5.5], stage 0 [6, 7]: ends at 7 (1 past 6, not 2.5);
//   reductions of 3 and 1: stage 1 [4, 7], stage 0 waits [7, 8]: ends at 8.
// Two ranks, one stage each: independent (ready 9 and 7, reductions 2 and 5: 11 and 12).
TEST(Cluster, OverlappedAllReduceEndsClosedForm) {
  EXPECT_EQ(mp::overlapped_allreduce_end({6, 4}, {1, 1.5}, {0, 0}, 1), (std::vector<double>{7}));
  EXPECT_EQ(mp::overlapped_allreduce_end({6, 4}, {1, 3}, {0, 0}, 1), (std::vector<double>{8}));
  EXPECT_EQ(mp::overlapped_allreduce_end({9, 7}, {2, 5}, {0, 1}, 2), (std::vector<double>{11, 12}));
}

// Hierarchical all-reduce: 12 MB over k = 4 devices on each of g = 3 nodes, intra 2 us and
// 100 GB/s (1e8 B/ms), inter 8 us and 10 GB/s (1e7 B/ms):
//   inside: reduce-scatter and all-gather, 2 (k-1) = 6 steps of 12e6/4 = 3e6 B: 6 (0.002 + 0.03)
//   across: a ring of 3 nodes on each device's 3e6 B shard, 2 (g-1) = 4 steps of 1e6 B:
//           4 (0.008 + 0.1)
TEST(Cluster, HierarchicalAllReduceClosedForm) {
  const mp::Link intra{0.002, 1 / 1e8}, inter{0.008, 1 / 1e7};
  const mp::AllReduceParts t = mp::hierarchical_allreduce(4, 3, 12e6, intra, inter);
  EXPECT_NEAR(t.intra_ms, 6 * (0.002 + 0.03), 1e-12);
  EXPECT_NEAR(t.inter_ms, 4 * (0.008 + 0.1), 1e-12);
  // One device a node: the plain inter-node ring; one node: the plain intra-node ring.
  EXPECT_NEAR(mp::hierarchical_allreduce(1, 5, 12e6, intra, inter).total(), mp::ring_allreduce_ms(5, 12e6, inter),
              1e-12);
  EXPECT_NEAR(mp::hierarchical_allreduce(4, 1, 12e6, intra, inter).total(), mp::ring_allreduce_ms(4, 12e6, intra),
              1e-12);
  // 1 x 512 on 128 nodes of 4 (the GPU example's links: 5 us, 25 GB/s across), GPT-2-124M's
  // 163M float gradients: a flat ring moves 2 (511/512) bytes over each NIC, the hierarchy
  // 2 (127/128) bytes / 4: the inter-node part falls about 4x.
  const mp::Link nv{0.003, 1 / 150e6}, ib{0.005, 1 / 25e6};
  const double bytes = 163.0e6 * 4;
  const double flat = mp::ring_allreduce_ms(512, bytes, ib);
  const double hier = mp::hierarchical_allreduce(4, 128, bytes, nv, ib).inter_ms;
  EXPECT_NEAR(flat, 1022 * (0.005 + bytes / 512 / 25e6), 1e-9);
  EXPECT_NEAR(hier, 254 * (0.005 + bytes / 512 / 25e6), 1e-9);
  EXPECT_GT(flat / hier, 3.9);
  EXPECT_LT(flat / hier, 4.1);
}

// The sweep prices each data-parallel group by where its members sit: 4 nodes of 4, p = 2,
// dp = 8. pp-major (rank = pp * 8 + d): each group fills 2 nodes, 4 a node; dp-major (rank =
// d * 2 + pp): each group has 2 on each of the 4 nodes.
TEST(Cluster, HierarchicalAllReduceFollowsThePlacement) {
  std::string text = kFourPerNode;
  const std::string order = "rank_order = \"dp-major\"";
  text.replace(text.find(order), order.size(), "allreduce = \"hierarchical\"");
  const mp::Cluster c = mp::parse_cluster(text, "hier.toml");
  ASSERT_EQ(c.allreduce, mp::AllReduceAlgo::hierarchical);
  mp::ModelShape shape{64, 16, 32, 4, 2, 16};
  auto count = [](const std::vector<mp::ParamSpec>& ps) {
    double n = 0;
    for (const auto& p : ps) n += double(p.numel());
    return n;
  };
  // Even split at p = 2: rank 0 holds the embedding and block 0, rank 1 block 1 and the head.
  const double rank_bytes[2] = {4 * (count(mp::embedding_params(shape)) + count(mp::block_params(shape, 0))),
                                4 * (count(mp::block_params(shape, 1)) + count(mp::head_params(shape)))};
  auto pp_major = [&](double b) { return 6 * c.intra.transfer_ms(b / 4) + 2 * c.inter.transfer_ms(b / 8); };
  auto dp_major = [&](double b) { return 2 * c.intra.transfer_ms(b / 2) + 6 * c.inter.transfer_ms(b / 8); };
  const mp::CostFile costs = mp::analytic_costs(shape, 8, false, c);
  mp::ScaleOptions opt;
  opt.global_batch = 16;
  opt.schedules = {"1f1b"};
  opt.timing = mp::AllReduceTiming::after;
  opt.prune = false;
  int seen[2] = {0, 0};
  for (const auto& x : mp::best_layouts(costs, c, 16, opt, 1000))
    if (x.p == 2 && x.dp == 8 && !x.auto_split) {
      const bool pp = x.order == mp::RankOrder::pp_major;
      ++seen[pp];
      const double expect = pp ? std::max(pp_major(rank_bytes[0]), pp_major(rank_bytes[1]))
                               : std::max(dp_major(rank_bytes[0]), dp_major(rank_bytes[1]));
      EXPECT_NEAR(x.allreduce_ms, expect, 1e-12) << mp::to_string(x.order);
    }
  EXPECT_GT(seen[0], 0);
  EXPECT_GT(seen[1], 0);
}

// The overlapped all-reduce in the sweep, p = 1 with two chunks (interleaved, v = 2, m = 1), dp = 2
// on two one-device nodes, at a slow device (1 GFLOP/s) so compute dwarfs the reductions: chunk 1
// (block 1 and the head) is ready when its backward ends and its reduction finishes inside chunk
// 0's backward, so only chunk 0's (embedding and block 0) is exposed. After the pipeline, one
// reduction of every parameter is.
TEST(Cluster, OverlappedAllReduceHidesAllButTheLastChunk) {
  const mp::Cluster c = mp::parse_cluster(R"(
[cluster]
nodes = 2
devices_per_node = 1
[device]
tflops = 0.001
memory_gib = 80
memory_bandwidth_gbs = 1
[link.inter]
latency_us = 8
bandwidth_gbs = 10
)",
                                          "slow.toml");
  const mp::ModelShape shape{64, 16, 32, 4, 2, 16};
  auto count = [](const std::vector<mp::ParamSpec>& ps) {
    double n = 0;
    for (const auto& p : ps) n += double(p.numel());
    return n;
  };
  const double chunk0 = count(mp::embedding_params(shape)) + count(mp::block_params(shape, 0));
  const double chunk1 = count(mp::block_params(shape, 1)) + count(mp::head_params(shape));
  const double loss = mp::tree_allreduce_ms(2, 12 * 2, c.inter);  // 12 B a sample, global batch 2
  const mp::CostFile costs = mp::analytic_costs(shape, 2, false, c);
  for (auto timing : {mp::AllReduceTiming::overlapped, mp::AllReduceTiming::after}) {
    mp::ScaleOptions opt;
    opt.global_batch = 2;
    opt.schedules = {"interleaved-1f1b"};
    opt.timing = timing;
    opt.prune = false;
    int seen = 0;
    for (const auto& x : mp::best_layouts(costs, c, 2, opt, 1000))
      if (x.p == 1 && x.dp == 2 && x.v == 2 && !x.auto_split) {
        ++seen;
        const double exposed = timing == mp::AllReduceTiming::overlapped
                                   ? mp::ring_allreduce_ms(2, 4 * chunk0, c.inter)
                                   : mp::ring_allreduce_ms(2, 4 * (chunk0 + chunk1), c.inter);
        EXPECT_NEAR(x.exposed_comm_ms, exposed + loss, 1e-9) << mp::to_string(x.recompute);
      }
    EXPECT_GT(seen, 0);
  }
}

// The memory-bound kernels at the device's bandwidth. One block's forward of one sample (T = 16,
// C = 32, H = 4) reads and writes: two LayerNorms 2 (2TC + 2T), softmax 2HT^2, GELU 8TC, two
// residual adds 2 (3TC) values of 4 bytes; its backward-input: two LayerNorms 2 (3TC + 2T),
// softmax 3HT^2, GELU 12TC, the residual gradients 2 (3TC); W: the LayerNorm weight gradients
// 2 (2TC). The head (V = 64): final LayerNorm 2TC + 2T, cross-entropy 2VT + T forward; 3TC + 2T
// and 2VT backward; 2TC for W.
TEST(Cluster, MemoryBoundKernelsChargedAtTheBandwidth) {
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");  // 10 TFLOP/s, 1000 GB/s
  const double T = 16, C = 32, H = 4, V = 64;
  const mp::CostFile costs = mp::analytic_costs({64, 16, 32, 4, 2, 16}, 8, false, c);
  const double flop_ms = 1 / 10e9, byte_ms = 1 / 1000e6;
  const double fwd_values = 2 * (2 * T * C + 2 * T) + 2 * H * T * T + 8 * T * C + 2 * (3 * T * C);
  const double bwd_values = 2 * (3 * T * C + 2 * T) + 3 * H * T * T + 12 * T * C + 2 * (3 * T * C);
  const double w_values = 2 * (2 * T * C);
  const auto& block = costs.sizes[0].parts[1][0];  // block 0, no recompute
  EXPECT_NEAR(block.F, (24 * T * C * C + 4 * T * T * C) * flop_ms + 4 * fwd_values * byte_ms, 1e-15);
  EXPECT_NEAR(block.I, (24 * T * C * C + 8 * T * T * C) * flop_ms + 4 * bwd_values * byte_ms, 1e-15);
  EXPECT_NEAR(block.W, 24 * T * C * C * flop_ms + 4 * w_values * byte_ms, 1e-15);
  const auto& head = costs.sizes[0].parts.back()[0];
  EXPECT_NEAR(head.F, 2 * T * C * V * flop_ms + 4 * (2 * T * C + 2 * T + 2 * V * T + T) * byte_ms, 1e-15);
  EXPECT_NEAR(head.I, 2 * T * C * V * flop_ms + 4 * (3 * T * C + 2 * T + 2 * V * T) * byte_ms, 1e-15);
  EXPECT_NEAR(head.W, 2 * T * C * V * flop_ms + 4 * 2 * T * C * byte_ms, 1e-15);
}

// Interleaving is swept up to v = n_layer / p (one block a chunk), not capped at 4: every v up to
// 4, then 6, 8, 12, 16, ... about 1.5x apart, and n_layer / p itself. Interleaved 1F1B takes v >= 2.
TEST(Cluster, SweepTriesChunkCountsUpToLayersOverP) {
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  mp::ScaleOptions opt;
  opt.global_batch = 8;
  opt.schedules = {"interleaved-1f1b"};
  opt.prune = false;
  auto swept = [&](int layers, int devices) {
    std::set<std::pair<int, int>> pv;
    const mp::CostFile costs = mp::analytic_costs({64, 16, 32, 4, layers, 16}, 8, false, c);
    for (const auto& x : mp::best_layouts(costs, c, devices, opt, 100000)) pv.insert({x.p, x.v});
    return pv;
  };
  using PV = std::set<std::pair<int, int>>;
  EXPECT_EQ(swept(8, 2), (PV{{1, 2}, {1, 3}, {1, 4}, {1, 6}, {1, 8}, {2, 2}, {2, 3}, {2, 4}}));
  EXPECT_EQ(swept(20, 1), (PV{{1, 2}, {1, 3}, {1, 4}, {1, 6}, {1, 8}, {1, 12}, {1, 16}, {1, 20}}));
}

TEST(Cluster, BadFilesAreRefusedNamingKeyValueAndAllowed) {
  const std::string base = "[cluster]\nnodes = 2\ndevices_per_node = 2\n[device]\nmemory_gib = 8\n";
  const std::string links =
      "[link.intra]\nlatency_us = 1\nbandwidth_gbs = 10\n[link.inter]\nlatency_us = 1\nbandwidth_gbs = 10\n";
  EXPECT_EQ(refused(base + links), "");
  auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
      if (msg.find(p) == std::string::npos) return ::testing::AssertionFailure() << "'" << p << "' not in: " << msg;
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(has(refused("[cluster]\nnodes = 0\ndevices_per_node = 2\n[device]\nmemory_gib = 8\n" + links),
                  {"bad.toml", "'cluster.nodes'", "value 0", "allowed: an integer 1 .. 16777216"}));
  EXPECT_TRUE(has(refused(base + "[link.intra]\nlatency_us = 1\nbandwidth_gbs = -3\n[link.inter]\nlatency_us = 1\n"
                                 "bandwidth_gbs = 10\n"),
                  {"'link.intra.bandwidth_gbs'", "value -3", "allowed: a number 1e-06 .. 1e+09"}));
  EXPECT_TRUE(has(refused(base + links + "[device2]\n"), {"unknown section 'device2'", "allowed:"}));
  EXPECT_TRUE(has(refused(base + links + "[link.intra2]\n"), {"unknown section 'link.intra2'"}));
  EXPECT_TRUE(has(refused(base + "[link.intra]\nlatency_us = 1\nbandwith_gbs = 10\n"),
                  {"unknown key 'link.intra.bandwith_gbs'", "bandwidth_gbs"}));
  EXPECT_TRUE(has(refused(base + "[link.intra]\nlatency_us = 1\nbandwidth_gbs = 10\n"),
                  {"'link.inter.latency_us' is missing"}));
  EXPECT_TRUE(has(refused(base + links + "[cluster]\n"), {"not valid TOML"}));
  EXPECT_TRUE(has(refused("[cluster]\nnodes = 2\ndevices_per_node = 2\nrank_order = \"zigzag\"\n[device]\n"
                          "memory_gib = 8\n" +
                          links),
                  {"'cluster.rank_order'", "\"zigzag\"", "\"dp-major\""}));
  EXPECT_TRUE(has(refused("[cluster]\nnodes = \"2\"\ndevices_per_node = 2\n[device]\nmemory_gib = 8\n" + links),
                  {"'cluster.nodes'", "value \"2\""}));
}

// Integers are range-checked in the 64 bits TOML reads, before they are narrowed to int: 2^32 + 2
// devices a node ran as 2, 10^12 printed a negative device count.
TEST(Cluster, WideIntegersAreRefusedBeforeNarrowing) {
  const std::string device = "[device]\nmemory_gib = 8\n";
  const std::string links =
      "[link.intra]\nlatency_us = 1\nbandwidth_gbs = 10\n[link.inter]\nlatency_us = 1\nbandwidth_gbs = 10\n";
  for (const char* v : {"4294967298", "1000000000000", "9223372036854775807", "16777217"}) {
    const std::string msg =
        refused("[cluster]\nnodes = 1\ndevices_per_node = " + std::string(v) + "\n" + device + links);
    EXPECT_NE(msg.find("bad.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'cluster.devices_per_node' has value " + std::string(v)), std::string::npos) << msg;
    EXPECT_NE(msg.find("allowed: an integer 1 .. 16777216"), std::string::npos) << msg;
    const std::string msg2 =
        refused("[cluster]\nnodes = " + std::string(v) + "\ndevices_per_node = 1\n" + device + links);
    EXPECT_NE(msg2.find("'cluster.nodes' has value " + std::string(v)), std::string::npos) << msg2;
  }
  EXPECT_NE(refused("[cluster]\nnodes = 4096\ndevices_per_node = 8192\n" + device + links)
                .find("nodes x devices_per_node <= 16777216"),
            std::string::npos);
}

// Floating-point values must be finite and within the documented ranges, so that every derived
// time is finite and printable (4.9e-324 TFLOP/s aborted `scale`; 1e-300 printed 300 digits).
TEST(Cluster, NumbersOutsideTheirRangeAreRefused) {
  const std::string head = "[cluster]\nnodes = 2\ndevices_per_node = 2\n";
  const std::string links =
      "[link.intra]\nlatency_us = 1\nbandwidth_gbs = 10\n[link.inter]\nlatency_us = 1\nbandwidth_gbs = 10\n";
  struct Case {
    const char *key, *value, *allowed;
  };
  for (const Case& c :
       {Case{"tflops", "4.9e-324", "1e-06 .. 1e+06"}, Case{"tflops", "1e-300", "1e-06 .. 1e+06"},
        Case{"tflops", "1e300", "1e-06 .. 1e+06"}, Case{"tflops", "inf", "1e-06 .. 1e+06"},
        Case{"tflops", "nan", "1e-06 .. 1e+06"}, Case{"memory_bandwidth_gbs", "1e-30", "1e-06 .. 1e+09"},
        Case{"speedup", "1e-30", "1e-06 .. 1e+06"}, Case{"memory_gib", "1e300", "1e-06 .. 1e+09"}}) {
    const std::string extra = std::string(c.key) == "memory_gib" ? "" : "memory_gib = 8\n";
    const std::string msg = refused(head + "[device]\n" + extra + c.key + " = " + c.value + "\n" + links);
    EXPECT_NE(msg.find("'device." + std::string(c.key) + "'"), std::string::npos)
        << c.key << "=" << c.value << ": " << msg;
    EXPECT_NE(msg.find("allowed: a number " + std::string(c.allowed)), std::string::npos) << msg;
  }
  const std::string msg = refused(head +
                                  "[device]\nmemory_gib = 8\n[link.intra]\nlatency_us = 1e300\n"
                                  "bandwidth_gbs = 10\n[link.inter]\nlatency_us = 1\nbandwidth_gbs = 10\n");
  EXPECT_NE(msg.find("'link.intra.latency_us'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allowed: a number 0 .. 1e+09"), std::string::npos) << msg;
  EXPECT_EQ(refused(head + "[device]\nmemory_gib = 8\ntflops = 1e-6\nspeedup = 1e6\n" + links), "");
}

// The tuner where memory binds: under a cap below what every schedule holds at its default cap
// (p stored micro-batches for the capped schedules, 1F1B's p), only the capped schedules planned at a
// lower cap remain, each predicted as that schedule at that cap (the simulation of the same order
// made directly), and none over the bytes.
TEST(Tuner, CappedSchedulesAreTriedAtEveryCapBelowPWhereMemoryBinds) {
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  const mp::CostFile costs = mp::analytic_costs({64, 16, 32, 4, 8, 16}, 8, false, c);
  const int p = 4;
  // 1F1B and the schedules whose row reads pipeline.memory_cap.
  std::vector<std::string> names{"1f1b"};
  for (const auto& spec : minipipe::sched::variant_table())
    if (spec.knobs & minipipe::sched::kMemoryCap) names.emplace_back(spec.name);
  ASSERT_GE(names.size(), 3u);
  double least_default = 1e300;
  for (const auto& c0 : mp::enumerate_configs(costs, p, 8, 0, names)) {
    EXPECT_EQ(c0.memory_cap, 0) << "caps are swept only where memory binds";
    least_default = std::min(least_default, c0.peak_bytes);
  }
  const double bytes = 0.999 * least_default;
  const auto fit = mp::enumerate_configs(costs, p, 8, bytes, names);
  ASSERT_FALSE(fit.empty()) << "no capped schedule fits under " << bytes << " bytes";
  for (const auto& x : fit) {
    EXPECT_NE(x.schedule, "1f1b");
    EXPECT_GT(x.memory_cap, 0);
    EXPECT_LT(x.memory_cap, p);
    EXPECT_LE(x.peak_bytes, bytes);
    const mp::TuneCandidate direct = mp::predict(costs, p, x.schedule, x.v, x.m, x.split, x.recompute, x.memory_cap);
    EXPECT_EQ(direct.peak_bytes, x.peak_bytes);
    EXPECT_EQ(direct.bubble, x.bubble);
  }
}

// DualPipe's step ends with the sum of its two model copies, which the tuner adds to each rank's
// fixed cost: at p = 2 every rank holds one part of each copy, so all of the model's gradients,
// whose twins are on the other rank. Deterministic: 4 passes of the 32 limb bytes of each element
// at the link's copy rate, plus a latency per stage; fast: 2 passes of the 4-byte floats. A
// one-copy schedule adds nothing.
TEST(Tuner, DualPipeStepAddsTheSumOfTheTwoCopies) {
  const mp::Cluster c = mp::parse_cluster(kFourPerNode, "four.toml");
  const minipipe::ModelShape shape{64, 16, 32, 4, 4, 16};
  double params = 0;
  auto add = [&](const std::vector<minipipe::ParamSpec>& ps) {
    for (const auto& q : ps) params += static_cast<double>(q.numel());
  };
  add(minipipe::embedding_params(shape));
  for (int l = 0; l < shape.n_layer; ++l) add(minipipe::block_params(shape, l));
  add(minipipe::head_params(shape));
  ASSERT_GT(params, 0);
  for (const bool det : {true, false}) {
    mp::CostFile costs = mp::analytic_costs(shape, 8, det, c);
    costs.step_fixed_ms.assign(static_cast<std::size_t>(shape.n_layer + 2), 0.25);
    costs.transfer_measured = true;
    costs.latency_ms = 0.02;
    costs.ms_per_byte = 1e-6;
    const double copy_sum = params * (det ? 4 * 32 : 2 * 4) * costs.ms_per_byte + 2 * costs.latency_ms;
    // Each part's zeroing, finalize and update (0.25 ms, fixed_slowdown 1): a DualPipe rank at
    // p = 2 holds a whole copy's worth of parts, a 1F1B rank half of them.
    const double parts_fixed = 0.25 * (shape.n_layer + 2);
    const mp::TuneCandidate dual = mp::predict(costs, 2, "dualpipe", 2, 2, {2, 2}, mp::Recompute::none);
    EXPECT_NEAR(dual.fixed_ms, parts_fixed + copy_sum, 1e-9 * copy_sum) << (det ? "deterministic" : "fast");
    EXPECT_NEAR(dual.step_ms - dual.makespan_ms, dual.fixed_ms, 1e-9);
    const mp::TuneCandidate one = mp::predict(costs, 2, "1f1b", 1, 2, {2, 2}, mp::Recompute::none);
    EXPECT_NEAR(one.fixed_ms, parts_fixed / 2, 1e-12) << "one copy: half the parts a rank, no sum of copies";
  }
}
