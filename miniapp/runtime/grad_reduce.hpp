// The data-parallel gradient reduction: each stage's accumulators summed over the replicas in
// buckets of nonblocking collectives, started as soon as the stage's last W is done.
//
// What a bucket moves and when (docs/design.md §3, §4 rule 2):
// - A bucket is up to kBucketElements consecutive gradient elements of one stage (its parameters
//   in params() order, cut where the bucket is full); a stage's buckets are posted in that order
//   when the stage's last W (or B) of the step has run, or after the pipeline with overlap off.
// - Deterministic mode, compact form: the replicas first agree, per piece of a bucket (one
//   parameter's elements in it), on the bitwise OR of the magnitudes of their 128-bit exact sums
//   (one small MPI_BOR all-reduce of 16 bytes per piece). Its highest set bit `hi` and lowest set
//   bit `lo` bound every replica's value x: x = y 2^lo with |y| < 2^(hi - lo). With c =
//   ceil(log2 dp): hi - lo + c <= 63 sends y as one int64 (8 bytes per element); hi - lo + 2c <=
//   124 sends it as two int64 words, the low 63 - c bits and the rest (16 bytes); anything wider,
//   and a piece whose values are all zero on every replica (0 bytes) aside, falls back to the full
//   four 32-bit limbs (32 bytes). Every replica computes the same choice from the agreed OR; the
//   bounds make each int64 sum exact whatever the reduction tree, so the bits are those of the
//   full limbs. Full form (pipeline.allreduce_limbs = full): four limbs always, no agreement.
// - Fast mode: each parameter's float partials in place, chunks of kBucketElements.
// - Flat: one MPI_Iallreduce(SUM) per bucket over the stage's replicas.
// - Hierarchical, two-level (every node holds equally many of the stage's replicas, s each): the
//   bucket's message (n elements of MPI's type: int64 words, or fast mode's reals) is cut into s
//   nearly equal contiguous shards (the first n mod s one element longer: a cut may split a
//   gradient element's words, which are summed word by word anyway); an MPI_Ireduce_scatter inside the node leaves
//   shard j's node sum on the node's rank j, an MPI_Iallreduce of shard j among the ranks with node-local index j (one
//   per node) makes it the sum over every replica, and an MPI_Iallgatherv inside the node gives every rank the whole
//   bucket. Each rank's inter-node link so carries 1/s of the bucket (the cluster model's hierarchical price). The
//   shard lives in a buffer of its own (MPI forbids aliasing the reduce-scatter's input and output). Steps 1 and 3 are
//   skipped at one replica per node, step 2 on a single node.
// - Hierarchical, leader form (the nodes hold unequal numbers of the stage's replicas, say 2 + 1,
//   where no node-local index meets every node): an MPI_Ireduce to the first rank of each node,
//   an MPI_Iallreduce among those node leaders and an MPI_Ibcast inside the node. The replicas
//   agree on the form when the reducer is built; the run's banner names it.
//   Exact words are integer sums, so either form's bits equal flat's; fast mode's float sums take
//   the MPI library's order in each step, so their bits may differ from flat's (as flat's own do
//   from one library to another).
// Each phase of the buckets has a communicator of its own and posts in bucket order, so every rank
// issues each communicator's collectives in one order, whenever it sees the previous phase end.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/exact_limbs.hpp"
#include "miniapp/runtime/comm.hpp"
#include "miniapp/runtime/stage.hpp"

namespace minipipe {

enum class AllreduceKind { flat, hierarchical };

struct ReduceConfig {
  bool overlap = true;  // pipeline.overlap_allreduce: a stage's buckets start at its last W
  bool compact = true;  // pipeline.allreduce_limbs = compact (else full)
  AllreduceKind kind = AllreduceKind::flat;
  int ranks_per_node = 0;  // pipeline.ranks_per_node: consecutive job ranks per node; 0 = MPI's shared-memory split
};

// What one step's reduction did on this rank: from its first bucket's start to the end of finish
// (seconds on MPI_Wtime's clock); bytes of int64 words or reals this rank sent, and the gradient
// elements they carried.
struct ReduceStats {
  double first_start = 0, last_done = 0;
  double bytes = 0, elements = 0;
  int full_pieces = 0;  // exact pieces sent as four full limbs (all of them with allreduce_limbs = full)
};

template <class T>
class GradReducer {
 public:
  static constexpr std::size_t kBucketElements = std::size_t(1) << 20;

  // `replicas` joins the ranks that hold the same stages in every replica; `job` (every rank)
  // places ranks on nodes for the hierarchical form. Collective over `replicas`.
  GradReducer(MPI_Comm job, MPI_Comm replicas, CommPath path, const ReduceConfig& cfg, double timeout_s);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // A new step: no bucket in flight.
  void begin_step();
  // Posts `s`'s buckets (its gradients are complete: its last W ran). Once per stage and step.
  void start(Stage<T>& s);
  // Advances buckets whose collective completed (never blocks on a peer).
  void progress();
  // Starts the stages not started yet, completes every bucket, and merges the overflow flags of
  // the replicas (an overflow on any replica is an overflow of the sum).
  void finish(std::vector<Stage<T>>& stages);
  const ReduceStats& stats() const { return stats_; }
  int node_size() const { return node_size_; }
  // Hierarchical only: the two-level form runs (false: the leader form, or flat).
  bool two_level() const { return two_level_; }

 private:
  enum Kind {
    kAgree = 0,
    kAllreduce,
    kNodeReduce,  // leader form
    kLeaders,
    kNodeBcast,
    kNodeScatter,  // two-level form
    kCross,
    kNodeGather,
    kKinds
  };
  struct Piece {
    GradAccum<T>* acc = nullptr;
    std::size_t first = 0, len = 0;
    int words = 4;           // int64 words per element: 0, 1, 2 or 4 (full limbs)
    int shift = 0;           // lo: the agreed lowest set bit
    std::size_t offset = 0;  // in the bucket's buffer
  };
  struct Bucket {
    int stage = -1;
    bool exact = true;
    bool packed = false;  // its message is packed (and staged) for this step
    std::vector<Piece> pieces;
    std::vector<Kind> steps;
    std::size_t next = 0;  // the step to post next
    bool in_flight = false, done = false;
    int seq[kKinds] = {};  // this bucket's place in each kind's posting order
    MPI_Request req = MPI_REQUEST_NULL;
    Kokkos::View<std::uint64_t*, MemSpace> ors;  // (2 per piece) OR of |x|: low, high words
    std::vector<std::uint64_t> ors_host;
    LimbView words;                                     // the packed sums (exact)
    Kokkos::View<std::int64_t*, HostSpace> host_words;  // their host copy (host staging)
    typename View1<T>::HostMirror staged;               // fast mode, host staging
    std::size_t count = 0;                              // elements of MPI's type in the message
    std::vector<int> shard_counts, shard_displs;        // two-level: the node's shards of the message
    Kokkos::View<std::int64_t*, MemSpace> shard;        // this rank's shard (MPI reads device buffers)
    Kokkos::View<std::int64_t*, HostSpace> host_shard;  // this rank's shard (host staging)
  };

  void build(Stage<T>& s, std::vector<Bucket>& out) const;
  void advance(Bucket& b);
  void before(Bucket& b, Kind k);
  void post(Bucket& b, Kind k);
  void after(Bucket& b, Kind k);
  void complete(Bucket& b);
  void choose_forms(Bucket& b);
  void* message(Bucket& b);
  void* shard(Bucket& b);
  void cut_shards(Bucket& b);
  MPI_Datatype type_of(const Bucket& b) const;

  MPI_Comm replicas_;
  MPI_Comm comms_[kKinds];  // each phase's communicator; MPI_COMM_NULL where unused
  CommPath path_;
  ReduceConfig cfg_;
  double timeout_ = 0;
  bool direct_ = true;  // MPI reads the device buffers
  int dp_ = 1, log2dp_ = 0, node_size_ = 1, node_rank_ = 0, nodes_ = 1;
  bool two_level_ = false;                      // hierarchical with equal nodes (else the leader form)
  ExecSpace space_;                             // the instance packing and unpacking run on (transfer_instance())
  std::map<int, std::vector<Bucket>> buckets_;  // by stage id, built once
  std::vector<Bucket*> order_;                  // this step's buckets in start order
  std::map<const Stage<T>*, bool> started_;
  int posted_[kKinds] = {}, assigned_[kKinds] = {};
  ReduceStats stats_;
};

}  // namespace minipipe
