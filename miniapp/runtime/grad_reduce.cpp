// GradReducer: a stage's gradients in buckets through nonblocking collectives, each phase posted
// in bucket order on its own communicator; the compact exact form's pack and unpack kernels.
#include "miniapp/runtime/grad_reduce.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "miniapp/mpi/peer_wait.hpp"

namespace minipipe {

namespace {

using U64 = std::uint64_t;
using I64 = std::int64_t;
using OrView = Kokkos::View<U64*, MemSpace>;

KOKKOS_INLINE_FUNCTION U64 uw(I64 x) {
  return static_cast<U64>(x);
}

// (lo, hi) >> s, arithmetic, for s in [0, 127].
KOKKOS_INLINE_FUNCTION void sar128(U64 lo, I64 hi, int s, U64& rlo, I64& rhi) {
  if (s == 0) {
    rlo = lo, rhi = hi;
  } else if (s < 64) {
    rlo = (lo >> s) | (uw(hi) << (64 - s)), rhi = hi >> s;
  } else {
    rlo = uw(hi >> (s - 64)), rhi = hi >> 63;
  }
}

// (w0, w1, w2) <<= s, for s in [0, 127].
KOKKOS_INLINE_FUNCTION void shl192(U64& w0, U64& w1, U64& w2, int s) {
  if (s >= 64) w2 = w1, w1 = w0, w0 = 0, s -= 64;
  if (s > 0) {
    w2 = (w2 << s) | (w1 >> (64 - s));
    w1 = (w1 << s) | (w0 >> (64 - s));
    w0 <<= s;
  }
}

// The bitwise OR of |x| over acc[first, first + n) into ors(2k) (low word) and ors(2k + 1) (high
// word), left in device memory (no host wait).
void magnitude_or(const ExecSpace& space, const ExactView& acc, std::size_t first, std::size_t n, const OrView& ors,
                  std::size_t k) {
  for (int word = 0; word < 2; ++word) {
    const Kokkos::View<U64, MemSpace> out = Kokkos::subview(ors, 2 * k + static_cast<std::size_t>(word));
    Kokkos::parallel_reduce(
        "GradReduce::magnitude_or", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
        KOKKOS_LAMBDA(const std::size_t i, U64& r) {
          const Fixed128 x = acc(first + i);
          const U64 m = uw(x.hi >> 63);  // all ones when negative: |x| = ~x + 1
          const U64 lo = (x.lo ^ m) + (m & 1u);
          const U64 hi = (uw(x.hi) ^ m) + ((m & 1u) & (lo == 0 ? 1u : 0u));
          r |= word == 0 ? lo : hi;
        },
        Kokkos::BOr<U64, MemSpace>(out));
  }
}

// acc[first, first + n) into buf from `offset`, `words` int64 per element: 1 = x >> shift,
// 2 = its low `low_bits` bits and the rest, 4 = the four 32-bit limbs of kernels/exact_limbs.hpp.
void pack(const ExecSpace& space, const ExactView& acc, std::size_t first, std::size_t n, int words, int shift,
          int low_bits, const LimbView& buf, std::size_t offset) {
  Kokkos::parallel_for(
      "GradReduce::pack", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(const std::size_t i) {
        const Fixed128 x = acc(first + i);
        if (words == 4) {
          const U64 hi = uw(x.hi);
          buf(offset + 4 * i + 0) = static_cast<I64>(x.lo & 0xffffffffu);
          buf(offset + 4 * i + 1) = static_cast<I64>(x.lo >> 32);
          buf(offset + 4 * i + 2) = static_cast<I64>(hi & 0xffffffffu);
          buf(offset + 4 * i + 3) = x.hi >> 32;
          return;
        }
        U64 ylo;
        I64 yhi;
        sar128(x.lo, x.hi, shift, ylo, yhi);  // exact: every replica's x is a multiple of 2^shift
        if (words == 1) {
          buf(offset + i) = static_cast<I64>(ylo);
          return;
        }
        U64 hlo;
        I64 hhi;
        sar128(ylo, yhi, low_bits, hlo, hhi);
        buf(offset + 2 * i) = static_cast<I64>(ylo & ((U64(1) << low_bits) - 1));
        buf(offset + 2 * i + 1) = static_cast<I64>(hlo);
      });
}

// The sums in buf back into acc[first, first + n): exact; `overflow` is set where a sum leaves
// the signed 128-bit range.
void unpack(const ExecSpace& space, const LimbView& buf, std::size_t offset, int words, int shift, int low_bits,
            const ExactView& acc, std::size_t first, std::size_t n, const FlagView& overflow) {
  Kokkos::parallel_for(
      "GradReduce::unpack", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(const std::size_t i) {
        Fixed128 x;
        if (words == 4) {
          bool over = false;
          acc(first + i) = ExactLimbs::fold(buf(offset + 4 * i), buf(offset + 4 * i + 1), buf(offset + 4 * i + 2),
                                            buf(offset + 4 * i + 3), over);
          if (over) overflow() = 1;
          return;
        }
        // The sum in 192 bits (it cannot leave them: see grad_reduce.hpp's bounds), shifted back.
        U64 w0, w1, w2;
        if (words == 1) {
          const I64 s = buf(offset + i);
          w0 = uw(s), w1 = w2 = uw(s >> 63);
        } else {
          const I64 low = buf(offset + 2 * i), high = buf(offset + 2 * i + 1);  // low >= 0
          const U64 sign = uw(high >> 63);
          w0 = uw(high) << low_bits;
          w1 = (uw(high) >> (64 - low_bits)) | (sign << low_bits);
          w2 = sign;
          const U64 s0 = w0 + uw(low);
          const U64 c0 = s0 < w0 ? 1u : 0u;
          const U64 s1 = w1 + c0;
          w2 += s1 < w1 ? 1u : 0u;
          w0 = s0, w1 = s1;
        }
        shl192(w0, w1, w2, shift);
        if (w2 != uw(static_cast<I64>(w1) >> 63)) overflow() = 1;
        x.lo = w0;
        x.hi = static_cast<I64>(w1);
        acc(first + i) = x;
      });
}

// MINIPIPE_TEST_WIDE_GRADIENT=1: replicas 0 and 1 add x = 2^124 + 1 (on the fixed-point grid) to
// the first element of every other exact accumulator before the reduction. Those sums then span
// 126 bits, which no compact form holds: the compact form must fall back to full limbs there and
// give the bits of full limbs with the same hook (int64 words summed past their range wrap, so a
// missing fallback changes the bits). =2: x = 2^100, which those pieces' two-word form holds.
int wide_gradient_hook() {
  static const int level = [] {
    const char* v = std::getenv("MINIPIPE_TEST_WIDE_GRADIENT");
    if (!v || !*v || std::string(v) == "0") return 0;
    return std::string(v) == "2" ? 2 : 1;
  }();
  return level;
}

void add_wide_value(const ExecSpace& space, const ExactView& acc, const FlagView& overflow, int level) {
  Kokkos::parallel_for(
      "GradReduce::test_wide_value", Kokkos::RangePolicy<ExecSpace>(space, 0, 1), KOKKOS_LAMBDA(const int) {
        Fixed128 x;
        if (level == 2)
          x.lo = 0, x.hi = I64(1) << 36;
        else
          x.lo = 1, x.hi = I64(1) << 60;
        int ov = 0;
        ExactSum::add(acc(0), x, ov);
        if (ov) overflow() = 1;
      });
}

int bit_length(U64 lo, U64 hi) {
  return hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll(lo);
}
int lowest_bit(U64 lo, U64 hi) {
  return lo ? __builtin_ctzll(lo) : 64 + __builtin_ctzll(hi);
}

}  // namespace

template <class T>
GradReducer<T>::GradReducer(MPI_Comm job, MPI_Comm replicas, CommPath path, const ReduceConfig& cfg, double timeout_s)
    : replicas_(replicas), path_(path), cfg_(cfg), timeout_(timeout_s), space_(transfer_instance()) {
  for (MPI_Comm& c : comms_) c = MPI_COMM_NULL;
  // Staged like the boundary transfers (executor.hpp): also on host memory, where the copies are
  // only a cost, so that CPU runs exercise the path a GPU without GPU-aware MPI takes.
  direct_ = path_ != CommPath::host_staging;
  MPI_Comm_size(replicas_, &dp_);
  while ((1 << log2dp_) < dp_) ++log2dp_;
  int job_rank = 0, rank = 0;
  MPI_Comm_rank(job, &job_rank);
  MPI_Comm_rank(replicas_, &rank);
  MPI_Comm_dup(replicas_, &comms_[kAgree]);
  MPI_Comm_dup(replicas_, &comms_[kAllreduce]);
  if (cfg_.kind == AllreduceKind::hierarchical) {
    // A node: the replicas on one shared-memory node, or on one block of ranks_per_node
    // consecutive job ranks (so that one machine can stand for several nodes).
    MPI_Comm node = MPI_COMM_NULL;
    if (cfg_.ranks_per_node > 0)
      MPI_Comm_split(replicas_, job_rank / cfg_.ranks_per_node, rank, &node);
    else
      MPI_Comm_split_type(replicas_, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank_);
    MPI_Comm_size(node, &node_size_);
    // The two-level form needs every node-local index on every node; with nodes of unequal size
    // (dp 3 at 2 ranks per node: 2 + 1) every replica takes the leader form instead.
    int sizes[2] = {-node_size_, node_size_};
    MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, replicas_);
    two_level_ = -sizes[0] == sizes[1];
    if (two_level_) {
      comms_[kNodeScatter] = node;
      MPI_Comm_dup(node, &comms_[kNodeGather]);
      MPI_Comm_split(replicas_, node_rank_, rank, &comms_[kCross]);  // shard j's holders, one per node
      MPI_Comm_size(comms_[kCross], &nodes_);
    } else {
      comms_[kNodeReduce] = node;
      MPI_Comm_dup(node, &comms_[kNodeBcast]);
      MPI_Comm_split(replicas_, node_rank_ == 0 ? 0 : MPI_UNDEFINED, rank, &comms_[kLeaders]);
      if (comms_[kLeaders] != MPI_COMM_NULL) MPI_Comm_size(comms_[kLeaders], &nodes_);
    }
  }
}

template <class T>
GradReducer<T>::~GradReducer() {
  for (MPI_Comm& c : comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

template <class T>
void GradReducer<T>::begin_step() {
  for (Bucket* b : order_)
    if (!b->done) throw std::logic_error("GradReducer: a new step with a gradient bucket in flight");
  order_.clear();
  started_.clear();
  for (int k = 0; k < kKinds; ++k) posted_[k] = assigned_[k] = 0;
  stats_ = ReduceStats{};
}

// The stage's buckets: exact accumulators side by side up to kBucketElements per bucket; fast
// mode's partials one parameter chunk per bucket (reduced in place).
template <class T>
void GradReducer<T>::build(Stage<T>& s, std::vector<Bucket>& out) const {
  std::vector<Kind> data;
  if (cfg_.kind == AllreduceKind::flat) {
    data = {kAllreduce};
  } else if (two_level_) {
    // Every rank of a communicator sees the same node size and node count: the same steps.
    if (node_size_ > 1) data.push_back(kNodeScatter);
    if (nodes_ > 1) data.push_back(kCross);
    if (node_size_ > 1) data.push_back(kNodeGather);
  } else {
    data = {kNodeReduce};
    if (comms_[kLeaders] != MPI_COMM_NULL && nodes_ > 1) data.push_back(kLeaders);
    data.push_back(kNodeBcast);
  }
  std::size_t used = kBucketElements;  // the first exact piece opens a bucket
  for (auto& p : s.params()) {
    GradAccum<T>& acc = p.acc;
    const bool exact = acc.mode == Mode::deterministic;
    for (std::size_t first = 0; first < acc.size();) {
      if (!exact || used == kBucketElements) {
        out.emplace_back();
        out.back().exact = exact;
        if (exact && cfg_.compact) out.back().steps.push_back(kAgree);
        out.back().steps.insert(out.back().steps.end(), data.begin(), data.end());
        used = 0;
      }
      Piece pc;
      pc.acc = &acc;
      pc.first = first;
      pc.len = std::min(acc.size() - first, kBucketElements - used);
      out.back().pieces.push_back(pc);
      used = exact ? used + pc.len : kBucketElements;
      first += pc.len;
    }
  }
  for (auto& b : out) {
    b.stage = s.id();
    if (b.exact) {
      b.ors = OrView("GradReduce::ors", 2 * b.pieces.size());
      b.ors_host.assign(2 * b.pieces.size(), 0);
    }
  }
}

template <class T>
void GradReducer<T>::start(Stage<T>& s) {
  if (started_[&s]) throw std::logic_error("GradReducer: stage " + std::to_string(s.id()) + " started twice");
  started_[&s] = true;
  // Its W kernels ran on the compute instance; packing runs on space_ and reads their sums.
  fence_space(ExecSpace(), "GradReduce::start::fence");
  std::vector<Bucket>& list = buckets_[s.id()];
  if (list.empty()) build(s, list);
  if (wide_gradient_hook()) {
    int rank = 0;
    MPI_Comm_rank(replicas_, &rank);
    if (rank < 2)
      for (std::size_t k = 0; k < s.params().size(); k += 2) {
        const GradAccum<T>& acc = s.params()[k].acc;
        if (acc.mode == Mode::deterministic && acc.size() > 0)
          add_wide_value(space_, acc.exact(), acc.overflow, wide_gradient_hook());
      }
  }
  if (order_.empty()) stats_.first_start = MPI_Wtime();
  for (Bucket& b : list) {
    b.next = 0, b.in_flight = b.done = b.packed = false;
    for (Kind k : b.steps) b.seq[k] = assigned_[k]++;
    order_.push_back(&b);
  }
  progress();
}

template <class T>
void GradReducer<T>::progress() {
  for (Bucket* b : order_)
    if (!b->done) advance(*b);
}

// Posts the bucket's next collective once the previous one completed and every earlier bucket
// has posted this kind's (so each communicator sees one order on every rank).
template <class T>
void GradReducer<T>::advance(Bucket& b) {
  while (!b.done) {
    if (b.in_flight) {
      int flag = 0;
      MPI_Test(&b.req, &flag, MPI_STATUS_IGNORE);
      if (!flag) return;
      b.in_flight = false;
      after(b, b.steps[b.next - 1]);
    }
    if (b.next == b.steps.size()) {
      complete(b);
      return;
    }
    const Kind k = b.steps[b.next];
    if (posted_[k] != b.seq[k]) return;
    before(b, k);
    post(b, k);
    ++posted_[k];
    ++b.next;
    b.in_flight = true;
  }
}

template <class T>
void GradReducer<T>::before(Bucket& b, Kind k) {
  if (k == kAgree) {
    for (std::size_t i = 0; i < b.pieces.size(); ++i)
      magnitude_or(space_, b.pieces[i].acc->exact(), b.pieces[i].first, b.pieces[i].len, b.ors, i);
    fence_space(space_, "GradReduce::agree::fence");
    blocking_copy(
        Kokkos::View<U64*, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(b.ors_host.data(), b.ors_host.size()),
        b.ors);
    return;
  }
  if (b.packed) return;
  b.packed = true;
  if (!b.exact) {
    const Piece& pc = b.pieces.front();
    b.count = pc.len;
    if (!direct_) {
      auto part = Kokkos::subview(pc.acc->sum, std::make_pair(pc.first, pc.first + pc.len));
      if (b.staged.extent(0) != pc.len) b.staged = typename View1<T>::HostMirror("GradReduce::staged", pc.len);
      blocking_copy(b.staged, part);
    }
    stats_.bytes += static_cast<double>(sizeof(T) * b.count);
    stats_.elements += static_cast<double>(pc.len);
    return;
  }
  if (!cfg_.compact) choose_forms(b);
  if (b.words.extent(0) < b.count) b.words = LimbView("GradReduce::words", b.count);
  const int low_bits = 63 - log2dp_;
  for (const Piece& pc : b.pieces)
    if (pc.words > 0) pack(space_, pc.acc->exact(), pc.first, pc.len, pc.words, pc.shift, low_bits, b.words, pc.offset);
  fence_space(space_, "GradReduce::pack::fence");  // MPI reads what the kernels wrote
  if (!direct_) {
    if (b.host_words.extent(0) < b.count)
      b.host_words = Kokkos::View<I64*, HostSpace>("GradReduce::host_words", b.count);
    blocking_copy(Kokkos::subview(b.host_words, std::make_pair(std::size_t(0), b.count)),
                  Kokkos::subview(b.words, std::make_pair(std::size_t(0), b.count)));
  }
  stats_.bytes += static_cast<double>(sizeof(I64) * b.count);
  for (const Piece& pc : b.pieces) stats_.elements += static_cast<double>(pc.len), stats_.full_pieces += pc.words == 4;
}

// Each piece's form from the agreed OR of magnitudes (every replica computes the same), and its
// place in the bucket's message.
template <class T>
void GradReducer<T>::choose_forms(Bucket& b) {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < b.pieces.size(); ++i) {
    Piece& pc = b.pieces[i];
    pc.words = 4, pc.shift = 0;
    if (cfg_.compact) {
      const U64 lo = b.ors_host[2 * i], hi = b.ors_host[2 * i + 1];
      if (lo == 0 && hi == 0) {
        pc.words = 0;  // zero on every replica: nothing to add
      } else {
        const int bottom = lowest_bit(lo, hi), span = bit_length(lo, hi) - bottom;
        if (span + log2dp_ <= 63)
          pc.words = 1, pc.shift = bottom;
        else if (span + 2 * log2dp_ <= 124)
          pc.words = 2, pc.shift = bottom;
      }
    }
    pc.offset = offset;
    offset += static_cast<std::size_t>(pc.words) * pc.len;
  }
  b.count = offset;
  if (b.count > static_cast<std::size_t>(INT_MAX))
    throw std::runtime_error("gradient all-reduce: a bucket of " + std::to_string(b.count) +
                             " words exceeds MPI's int count");
}

template <class T>
void* GradReducer<T>::message(Bucket& b) {
  if (b.exact) return direct_ ? static_cast<void*>(b.words.data()) : static_cast<void*>(b.host_words.data());
  const Piece& pc = b.pieces.front();
  return direct_ ? static_cast<void*>(pc.acc->sum.data() + pc.first) : static_cast<void*>(b.staged.data());
}

// Two-level: this rank's shard of the bucket's message (the message itself at one replica per
// node, where the cross-node all-reduce runs in place).
template <class T>
void* GradReducer<T>::shard(Bucket& b) {
  if (node_size_ == 1) return message(b);
  return direct_ ? static_cast<void*>(b.shard.data()) : static_cast<void*>(b.host_shard.data());
}

// The message's node_size_ shards (rank j of the node holds shard j: n / s elements, one more for
// the first n mod s), and room for this rank's. Every rank of the node has the same count (the
// agreed forms, or the same parameter chunk), so the same cut.
template <class T>
void GradReducer<T>::cut_shards(Bucket& b) {
  const std::size_t s = static_cast<std::size_t>(node_size_);
  b.shard_counts.assign(s, 0);
  b.shard_displs.assign(s, 0);
  std::size_t at = 0;
  for (std::size_t j = 0; j < s; ++j) {
    const std::size_t len = b.count / s + (j < b.count % s ? 1 : 0);
    b.shard_counts[j] = static_cast<int>(len);
    b.shard_displs[j] = static_cast<int>(at);
    at += len;
  }
  int size = 0;
  MPI_Type_size(type_of(b), &size);
  const std::size_t bytes =
      static_cast<std::size_t>(b.shard_counts[static_cast<std::size_t>(node_rank_)]) * static_cast<std::size_t>(size);
  const std::size_t words = std::max<std::size_t>(1, (bytes + sizeof(I64) - 1) / sizeof(I64));
  if (direct_ && b.shard.extent(0) < words)
    b.shard = Kokkos::View<I64*, MemSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "GradReduce::shard"), words);
  if (!direct_ && b.host_shard.extent(0) < words)
    b.host_shard =
        Kokkos::View<I64*, HostSpace>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "GradReduce::host_shard"), words);
}

template <class T>
MPI_Datatype GradReducer<T>::type_of(const Bucket& b) const {
  return b.exact ? MPI_INT64_T : mpi_type<T>();
}

template <class T>
void GradReducer<T>::post(Bucket& b, Kind k) {
  const int n = static_cast<int>(b.count);
  switch (k) {
    case kAgree:
      MPI_Iallreduce(MPI_IN_PLACE, b.ors_host.data(), static_cast<int>(b.ors_host.size()), MPI_UINT64_T, MPI_BOR,
                     comms_[k], &b.req);
      break;
    case kAllreduce:
    case kLeaders:
      MPI_Iallreduce(MPI_IN_PLACE, message(b), n, type_of(b), MPI_SUM, comms_[k], &b.req);
      break;
    case kNodeReduce:
      if (node_rank_ == 0)
        MPI_Ireduce(MPI_IN_PLACE, message(b), n, type_of(b), MPI_SUM, 0, comms_[k], &b.req);
      else
        MPI_Ireduce(message(b), nullptr, n, type_of(b), MPI_SUM, 0, comms_[k], &b.req);
      break;
    case kNodeBcast:
      MPI_Ibcast(message(b), n, type_of(b), 0, comms_[k], &b.req);
      break;
    case kNodeScatter:
      cut_shards(b);
      MPI_Ireduce_scatter(message(b), shard(b), b.shard_counts.data(), type_of(b), MPI_SUM, comms_[k], &b.req);
      break;
    case kCross:
      MPI_Iallreduce(MPI_IN_PLACE, shard(b), node_size_ == 1 ? n : b.shard_counts[static_cast<std::size_t>(node_rank_)],
                     type_of(b), MPI_SUM, comms_[k], &b.req);
      break;
    case kNodeGather:
      MPI_Iallgatherv(shard(b), b.shard_counts[static_cast<std::size_t>(node_rank_)], type_of(b), message(b),
                      b.shard_counts.data(), b.shard_displs.data(), type_of(b), comms_[k], &b.req);
      break;
    case kKinds:
      break;
  }
}

template <class T>
void GradReducer<T>::after(Bucket& b, Kind k) {
  if (k == kAgree) choose_forms(b);
}

template <class T>
void GradReducer<T>::complete(Bucket& b) {
  b.done = true;
  if (!b.exact) {
    if (!direct_) {
      const Piece& pc = b.pieces.front();
      blocking_copy(Kokkos::subview(pc.acc->sum, std::make_pair(pc.first, pc.first + pc.len)), b.staged);
    }
  } else {
    if (!direct_)
      Kokkos::deep_copy(space_, Kokkos::subview(b.words, std::make_pair(std::size_t(0), b.count)),
                        Kokkos::subview(b.host_words, std::make_pair(std::size_t(0), b.count)));
    const int low_bits = 63 - log2dp_;
    for (const Piece& pc : b.pieces) {
      if (pc.words > 0)
        unpack(space_, b.words, pc.offset, pc.words, pc.shift, low_bits, pc.acc->exact(), pc.first, pc.len,
               pc.acc->overflow);
      pc.acc->mark_written();
    }
  }
  stats_.last_done = MPI_Wtime();
}

template <class T>
void GradReducer<T>::finish(std::vector<Stage<T>>& stages) {
  for (auto& s : stages)
    if (!started_[&s]) start(s);
  for (;;) {
    progress();
    Bucket* first = nullptr;
    for (Bucket* b : order_)
      if (!b->done) {
        first = b;
        break;
      }
    if (!first) break;
    // The earliest unfinished bucket has its collective in flight: every earlier one is done.
    if (!first->in_flight) throw std::logic_error("GradReducer: the earliest unfinished bucket waits on nothing");
    const int stage = first->stage;
    wait_for_peer(first->req, timeout_, [&] {
      return "the gradient all-reduce of stage " + std::to_string(stage) + " over the " + std::to_string(dp_) +
             " data-parallel replicas";
    });
  }
  fence_space(space_, "GradReduce::unpack::fence");  // finalize reads the sums on the compute instance
  // An overflow on any replica is an overflow of the sum; finalize_grads names the parameter.
  // Each stage's flags are one array: one copy each way and one all-reduce for all of them.
  std::vector<int> overflow;
  for (auto& s : stages) {
    auto h = Kokkos::create_mirror_view(HostSpace(), s.overflow_flags());
    blocking_copy(h, s.overflow_flags());
    overflow.insert(overflow.end(), h.data(), h.data() + h.extent(0));
  }
  {
    CollectiveGuard guard(timeout_, "the gradient overflow flags of the data-parallel replicas");
    MPI_Allreduce(MPI_IN_PLACE, overflow.data(), static_cast<int>(overflow.size()), MPI_INT, MPI_MAX, replicas_);
  }
  std::size_t k = 0;
  for (auto& s : stages) {
    auto flags = s.overflow_flags();
    auto h = Kokkos::create_mirror_view(flags);
    for (std::size_t i = 0; i < h.extent(0); ++i) h(i) = overflow[k++];
    blocking_copy(flags, h);
  }
  stats_.last_done = MPI_Wtime();  // the reduction's end: its flags are merged too
}

template class GradReducer<float>;
template class GradReducer<double>;

}  // namespace minipipe
