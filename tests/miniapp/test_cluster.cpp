// The cluster model against closed forms: each link's transfer time, which boundaries cross a
// node edge under each rank order, the ring and tree all-reduce, the pipeline with links charged,
// the all-reduce bytes the trainer moves, and bad cluster files refused naming key and value.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>

#include "kernels/exact_limbs.hpp"
#include "miniapp/model/model.hpp"
#include "miniapp/tuning/cluster.hpp"
#include "miniapp/tuning/scale_model.hpp"
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
  // trainer.cpp reduces each exact accumulator as ExactLimbs::kLimbs int64 words.
  EXPECT_EQ(mp::allreduce_bytes_per_element(true), double(mp::ExactLimbs::kLimbs * sizeof(std::int64_t)));
  EXPECT_EQ(mp::allreduce_bytes_per_element(false), 4.0);
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
  for (bool det : {true, false}) {
    const mp::CostFile costs = mp::analytic_costs(shape, 8, det, c);
    mp::ScaleOptions opt;
    opt.global_batch = 8;
    opt.schedules = {"sequential"};
    const auto best = mp::best_layouts(costs, c, 2, opt, 50);
    bool seen = false;
    for (const auto& x : best)
      if (x.p == 1 && x.dp == 2) {
        seen = true;
        EXPECT_DOUBLE_EQ(x.allreduce_ms, mp::ring_allreduce_ms(2, numel * (det ? 32 : 4), c.inter));
      }
    EXPECT_TRUE(seen);
  }
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
