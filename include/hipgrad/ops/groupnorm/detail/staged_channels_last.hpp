/// @file staged_channels_last.hpp
/// @brief GroupNorm forward and fused backward over packed channels-last tensors (NHWC and kin)
///        in one launch that copies each unit into shared memory, sums it there, and writes the
///        output from there: x (and dy) leave memory once, as in one_read_channels_last.hpp, but
///        the data sit in shared memory rather than registers.
///
/// Why a second one-read design: holding the unit in registers forces narrow per-thread accesses
/// (pairs of channels, so that a thread's channels stay in one group) and plain loads whose
/// registers are live until the sums are done, which capped the reads in flight; a channels-last
/// band of 10-channel groups measured slower than three-pass that way (docs/perf-notes.md,
/// steps 9 and 13). Here every thread copies 16-byte vectors with asynchronous copies (cp.async on
/// sm_80 and later: no registers held, every copy of the block in flight at once), and keeps
/// per-channel constants for the vector's V channels, whichever groups they belong to.
///
/// A unit is a band of `band_groups` adjacent groups of one sample ([positions, band channels],
/// rows C elements apart), covered by a cluster of `cluster` blocks; block r takes rows
/// [r·span, (r + 1)·span). Thread t owns vector column t % columns of the band and the rows
/// first + j·rows_per_step (slot j < slots) of its block's rows; slot j of tensor k lies at
/// staged[k·span·columns + j·threads + t] (row j·rows_per_step + t / columns of the block, so no
/// vector is kept for padding rows past the span), so a thread only ever reads what it copied
/// itself and waits for its own copies, in kStagedChunks groups, summing a chunk as soon as it
/// landed (all groups in flight at once, but two at a time in the 16-bit backward with Swish).
///
/// All of a block's shared arrays but a few per-group ones live in its dynamic shared memory,
/// sized to the plan (StagedLayout): a block whose static arrays were sized for the largest band
/// and block left no room for two 6-block clusters' blocks on one multiprocessor.
///
/// Sums: per channel over the block's threads (shuffles within a warp, then the warps in order).
/// The backward without an activation keeps each block's channel totals for dγ/dβ and adds each
/// group's γ-weighted partials straight from the warps' (a warp per group, a fixed share per lane,
/// then a butterfly), then over the cluster, where only group totals travel; the backward through
/// Swish adds its channel totals over the cluster, then per group (kStagedGroupMeeting). The
/// forward adds per group over the block's channel totals (or, where each vector holds channels of
/// at most two groups, over each thread's two group partials, added per column like channels), then
/// over the cluster. The bits depend on the sizes only. The forward sums values around a shift per
/// group (the group's first value of the unit: the same for every block of the cluster), so that
/// channels and blocks combine by addition.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hipgrad/ops/groupnorm/detail/one_read_channels_last.hpp"
#include "hipgrad/primitives/gemm/pipeline.hpp"

namespace hipgrad::groupnorm::detail {

/// Most threads of a staged block, and most channels of its band.
inline constexpr int kStagedMaxThreads = 512;
inline constexpr int kStagedMaxBandChannels = 512;
/// Shared memory the staged kernels declare statically: per-group arrays of at most
/// kOneReadMaxBandGroups entries (GroupStatistics and a shift, or GradientSums).
inline constexpr std::size_t kStagedStaticBytes = 512;
/// Copy groups per thread: the sums of a chunk start while later chunks are still in flight.
inline constexpr int kStagedChunks = 4;
/// Registers per thread at most, and the most threads of a block that then fits twice on a
/// multiprocessor of 64 K registers: two blocks per multiprocessor, one loading while the other
/// sums or writes, ran faster than one block with twice the staging or with more threads
/// (docs/perf-notes.md, step 14). sm_90a, ptxas: the forwards spill nothing (52–76 bytes at 64
/// registers), the 16-bit backward with Swish 56 bytes, the other backwards nothing.
inline constexpr int kStagedForwardRegisters = 80, kStagedForwardPairThreads = 384;
inline constexpr int kStagedBackwardRegisters = 96, kStagedBackwardPairThreads = 320;
static_assert(2 * kStagedForwardPairThreads * kStagedForwardRegisters <= 65536, "two blocks fit the register file");
static_assert(2 * kStagedBackwardPairThreads * kStagedBackwardRegisters <= 65536, "two blocks fit the register file");
#if defined(HIPGRAD_BACKEND_CUDA)
// __maxnreg__ caps the registers whatever the block size (up to kStagedMaxThreads, where a block
// has a multiprocessor to itself); __launch_bounds__ would also cap the threads.
#define HIPGRAD_STAGED_FORWARD_BOUNDS __maxnreg__(kStagedForwardRegisters)
#define HIPGRAD_STAGED_BACKWARD_BOUNDS __maxnreg__(kStagedBackwardRegisters)
#else
#define HIPGRAD_STAGED_FORWARD_BOUNDS __launch_bounds__(kStagedMaxThreads)
#define HIPGRAD_STAGED_BACKWARD_BOUNDS __launch_bounds__(kStagedMaxThreads)
#endif

/// Where a staged block's dynamic shared memory goes (byte offsets from its start; the plan
/// computes them, staged_plan.hpp): the staging ([tensors][span · columns] 16-byte vectors), the
/// cluster's exchange of partial sums (pairs of floats, [cluster][band groups]), the scratch of
/// the warps' partials (`scratch_entries` pairs: at least one per thread; for the backward, those
/// of all V elements at once), the forward block's per-channel totals ([band channels] pairs),
/// then per-channel floats (γ, and β for the forward).
struct StagedLayout {
  int slots = 0;            ///< rows per thread
  int tensor_vectors = 0;   ///< staged vectors per tensor: span · columns
  int scratch_entries = 0;  ///< pairs of floats in the scratch: ≥ threads
  unsigned exchange_at = 0, scratch_at = 0, totals_at = 0, parameters_at = 0;
  unsigned bytes = 0;  ///< the whole
};

/// The region of the dynamic shared memory `staged` that starts `at` bytes in.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T* staged_region(uint4* staged, unsigned at) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(staged) + at);
}

/// A thread's column and rows in a staged block.
struct StagedLane {
  int column;      ///< 16-byte vector column of the band
  int slots;       ///< rows per thread (uniform over the block)
  Index first;     ///< the thread's first row (position)
  Index step;      ///< rows_per_step
  Index end;       ///< one past the block's last row
  int valid_slots; ///< slots [0, valid_slots) hold rows of the tensor

  HIPGRAD_DEVICE static StagedLane of(const OneReadRows& m, int rank, int slots) {
    StagedLane l;
    const int columns = static_cast<int>(m.columns);  // ≤ kStagedMaxBandChannels: 32-bit division
    l.column = static_cast<int>(threadIdx.x) % columns;
    l.slots = slots;
    const int lane_row = static_cast<int>(threadIdx.x) / columns;
    l.first = rank * m.span + lane_row;
    l.step = m.rows_per_step;
    l.end = m.block_end(rank);
    const Index rows = m.thread_rows(rank, lane_row);
    l.valid_slots = rows < slots ? static_cast<int>(rows) : slots;
    return l;
  }
  /// Slots [begin, end) of chunk k, valid ones only.
  HIPGRAD_DEVICE int chunk_begin(int k) const {
    const int b = k * ((slots + kStagedChunks - 1) / kStagedChunks);
    return b < valid_slots ? b : valid_slots;
  }
  HIPGRAD_DEVICE int chunk_end(int k) const { return chunk_begin(k + 1); }
};

/// The thread's staged vector of slot `slot` of the tensor staged at `tensor_staging`.
template <int V, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE Vector<T, V>& staged_vector(uint4* tensor_staging, int slot) {
  return *reinterpret_cast<Vector<T, V>*>(&tensor_staging[slot * static_cast<int>(blockDim.x) + threadIdx.x]);
}

/// A thread's copies of its valid slots of each tensor (bases[k] at row 0 of the thread's column;
/// rows `pitch` elements apart; tensor k staged `tensor_vectors`·k vectors in), issued a chunk at
/// a time, one commit group per chunk, at most kInFlight chunks in flight (start, then
/// visit_staged).
template <int kTensors, typename T, int kInFlight = kStagedChunks>
struct StagedCopies {
  static_assert(kInFlight >= 1 && kInFlight <= kStagedChunks, "chunks in flight");

  // Running pointers: a slot costs adds, not a 64-bit row product, whose registers made the
  // 16-bit backward with Swish spill 104–112 bytes at its 96 (docs/perf-notes.md, step 16).
  const T* source[kTensors];
  uint4* target;
  Index row_step;
  int tensor_vectors;

  HIPGRAD_DEVICE static StagedCopies of(uint4* staged, const StagedLane& l, const T* const (&bases)[kTensors], Index pitch,
                                        int tensor_vectors) {
    StagedCopies c;
    HIPGRAD_UNROLL
    for (int t = 0; t < kTensors; ++t) c.source[t] = bases[t] + l.first * pitch;
    c.target = staged + threadIdx.x;
    c.row_step = l.step * pitch;
    c.tensor_vectors = tensor_vectors;
    return c;
  }

  /// Issues chunk k (the chunks in order, each once).
  HIPGRAD_DEVICE void issue(const StagedLane& l, int k) {
    const int threads = static_cast<int>(blockDim.x);
    // The slots from the chunk's bounds, not a counter kept in the copier: counting in a member,
    // nvcc no longer unrolled the loop (16 copies in the PTX instead of 64) and the backwards ran
    // 1–2% slower (docs/perf-notes.md, step 29).
    for (int j = l.chunk_begin(k), end = l.chunk_end(k); j < end; ++j) {
      HIPGRAD_UNROLL
      for (int t = 0; t < kTensors; ++t) {
        gemm::copy_chunk(target + t * tensor_vectors, source[t], 16);
        source[t] += row_step;
      }
      target += threads;
    }
    gemm::commit_copies();
  }

  /// Issues the first kInFlight chunks.
  HIPGRAD_DEVICE void start(const StagedLane& l) {
    HIPGRAD_UNROLL
    for (int k = 0; k < kInFlight; ++k) issue(l, k);
  }
};

/// Waits until chunk k of this thread's copies has landed, `pending` later chunks still in flight
/// (both constants after unrolling).
HIPGRAD_DEVICE HIPGRAD_INLINE void wait_for_chunk(int pending) {
  static_assert(kStagedChunks == 4, "one case per number of chunks pending");
  switch (pending) {
    case 3: gemm::wait_copies<3>(); break;
    case 2: gemm::wait_copies<2>(); break;
    case 1: gemm::wait_copies<1>(); break;
    default: gemm::wait_copies<0>(); break;
  }
}

/// visit(slot) for each valid slot, chunk by chunk as the chunk lands; with the first kInFlight
/// chunks started (StagedCopies::start), each landed chunk starts the next one, so that at most
/// kInFlight are in flight. Two in flight made the 16-bit backward with Swish 3–7% faster and
/// the other staged kernels no faster (docs/perf-notes.md, step 29).
template <int kTensors, typename T, int kInFlight, typename Visit>
HIPGRAD_DEVICE HIPGRAD_INLINE void visit_staged(StagedCopies<kTensors, T, kInFlight>& copies, const StagedLane& l,
                                                Visit&& visit) {
  HIPGRAD_UNROLL
  for (int k = 0; k < kStagedChunks; ++k) {
    const int left = kStagedChunks - k;  // this chunk and the ones after it
    wait_for_chunk((left < kInFlight ? left : kInFlight) - 1);
    if (k + kInFlight < kStagedChunks) copies.issue(l, k + kInFlight);
    for (int j = l.chunk_begin(k); j < l.chunk_end(k); ++j) visit(j);
  }
}

/// How a staged block's warps hold their per-column partials after column_shuffles: lanes
/// [0, holders) of each warp, lane l those of thread warp·width + l.
struct ColumnHolders {
  int warps, holders, columns;

  HIPGRAD_DEVICE static ColumnHolders of(const OneReadRows& m) {
    const int columns = static_cast<int>(m.columns), width = warp_size();
    return ColumnHolders{static_cast<int>(blockDim.x) / width, columns < width ? columns : width, columns};
  }
  /// Scratch entries one element of every holder takes.
  HIPGRAD_DEVICE int entries() const { return warps * holders; }

  /// The block's total of `column` from `pass` (one element's entries, warps in order).
  template <typename Value>
  HIPGRAD_DEVICE Value column_total(const Value* pass, int column) const {
    constexpr int width = warp_size();
    Value total{};
    if (columns < width) {
      // Warp w's lanes start at column `first` = w·width mod columns: its lane for `column`.
      const int advance = width % columns;
      for (int w = 0, first = 0; w < warps; ++w) {
        total = total + pass[w * holders + (column >= first ? column - first : column + columns - first)];
        first += advance;
        if (first >= columns) first -= columns;
      }
    } else {
      for (int t = column; t < warps * width; t += columns) total = total + pass[t];
    }
    return total;
  }
  /// Entries of one column in an element's pass, in column_total's order: at most `per_column()`,
  /// the j-th at entry(column, j), or -1 where the column has fewer (columns ≥ the warp width).
  HIPGRAD_DEVICE int per_column() const {
    constexpr int width = warp_size();
    return columns < width ? warps : (warps * width + columns - 1) / columns;
  }
  HIPGRAD_DEVICE int entry(int column, int j) const {
    constexpr int width = warp_size();
    if (columns < width) {
      const int first = j * width % columns;  // warp j's first lane holds this column
      return j * holders + (column >= first ? column - first : column + columns - first);
    }
    const int t = column + j * columns;
    return t < warps * width ? t : -1;
  }
  /// Stores elements [e0, e0 + count) of the holders' `sums` into `scratch` ([element][warp][holder]).
  template <int V, typename Value>
  HIPGRAD_DEVICE void store(const Value (&sums)[V], int e0, int count, Value* scratch) const {
    const int lane = lane_id(), warp = static_cast<int>(threadIdx.x) / warp_size();
    if (lane < holders) {
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e)
        if (e >= e0 && e < e0 + count) scratch[((e - e0) * warps + warp) * holders + lane] = sums[e];
    }
  }
};

/// Adds every thread's V per-element `sums` across the lanes of its warp that share its column
/// (lanes `columns` apart), by shuffles: the warp's partials end in its holders (ColumnHolders).
template <int V, typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void column_shuffles(Value (&sums)[V], const OneReadRows& m) {
  constexpr int width = warp_size();
  const int columns = static_cast<int>(m.columns);
  // Rounds d = columns, 2·columns, … < width, uniform across the warp (the lanes' slot loops
  // diverged just before); a lane past the warp's end adds zeros.
  warp_converge();
  HIPGRAD_UNROLL
  for (int round = 0; (1 << round) < width; ++round) {
    const int d = columns << round;
    if (d >= width) break;
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) sums[e] = sums[e] + shfl_down_or_zero(sums[e], d);
  }
}

/// The block's total per channel of the band of every thread's V per-element `sums` (channel
/// column·V + e): deliver(channel, total) for each, once, from some thread of the block. Lanes of
/// a warp that share a column are added by shuffles first, then the warps' partials in warp order
/// through `scratch` (`scratch_entries` ≥ threads), as many elements per barrier as it holds: one
/// or two barriers for narrow bands, where a barrier per element made the sums a fifth of the
/// kernel's time (docs/perf-notes.md, step 15). The caller's next barrier orders what `deliver`
/// stores.
template <int V, typename Value, typename Deliver>
HIPGRAD_DEVICE HIPGRAD_INLINE void block_column_totals(Value (&sums)[V], const OneReadRows& m, Value* scratch,
                                                       int scratch_entries, Deliver&& deliver) {
  column_shuffles<V>(sums, m);
  const ColumnHolders h = ColumnHolders::of(m);
  const int per_pass_most = scratch_entries / h.entries();  // ≥ 1: warps · holders ≤ threads
  const int per_pass = per_pass_most < 1 ? 1 : (per_pass_most > V ? V : per_pass_most);
  for (int e0 = 0; e0 < V; e0 += per_pass) {
    const int count = V - e0 < per_pass ? V - e0 : per_pass;
    if (e0 > 0) block_sync();  // the previous pass has read `scratch`
    h.store<V>(sums, e0, count, scratch);
    block_sync();
    for (int item = static_cast<int>(threadIdx.x); item < count * h.columns; item += static_cast<int>(blockDim.x)) {
      const int k = item / h.columns, column = item % h.columns;
      deliver(column * V + e0 + k, h.column_total(scratch + k * h.entries(), column));
    }
  }
}

/// Stores `value` at `at` of `exchange` in block `to` of the cluster (this block's own when the
/// cluster is one block).
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void send_to_rank(Value* exchange, Index at, const Value& value, int to, int cluster) {
  if (cluster == 1) {
    exchange[at] = value;
  } else {
    cluster_peer(exchange, to)[at] = value;
  }
}

/// Stores `value` at `at` of `exchange` in every block of the cluster.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void send_to_cluster(Value* exchange, Index at, const Value& value, int cluster) {
  for (int r = 0; r < cluster; ++r) send_to_rank(exchange, at, value, r, cluster);
}

/// Slot `at` of the ranks' partials in `exchange` ([cluster][stride]) added in rank order.
template <typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE Value ranks_total(const Value* exchange, Index at, Index stride, int cluster) {
  Value total = exchange[at];
  for (int r = 1; r < cluster; ++r) total = total + exchange[r * stride + at];
  return total;
}

/// The cluster's per-channel totals of every thread's V per-element `sums`, then, for each channel
/// c of the band this thread visits (c = threadIdx.x, + blockDim.x, …), visit(c, total) with the
/// ranks' partials added in rank order. Each block sends its totals into slot `rank` of every
/// block's `exchange` ([cluster][band channels]) and reads only its own after the cluster
/// barrier, so no block waits for its peers before it exits; the caller arrives
/// (cluster_arrive_relaxed) at the start of the kernel, so that no block sends before every peer
/// runs.
template <int V, typename Value, typename Visit>
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_channel_totals(Value (&sums)[V], const OneReadRows& m, int rank, Value* scratch,
                                                          int scratch_entries, Value* exchange, Visit&& visit) {
  if (m.cluster > 1) cluster_wait();  // every peer has started
  const Index channels = m.columns * V;
  block_column_totals<V>(sums, m, scratch, scratch_entries,
                         [&](int c, const Value& total) { send_to_cluster(exchange, rank * channels + c, total, m.cluster); });
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  for (Index c = threadIdx.x; c < channels; c += blockDim.x) visit(c, ranks_total(exchange, c, channels, m.cluster));
}

/// Whether every V-channel vector (at a multiple of V) holds channels of at most two groups of
/// `group_channels` channels.
HIPGRAD_HOST_DEVICE constexpr bool vector_in_two_groups(Index group_channels, int V) {
  return group_channels + 1 >= V || 2 * group_channels == V;
}

/// A thread's V per-channel `values` added per group where its vector holds channels of at most two
/// (vector_in_two_groups): halves[0] those of its vector's first group, halves[1] the next one's.
/// The block then adds two values per column instead of V.
template <int V, typename Value>
HIPGRAD_DEVICE HIPGRAD_INLINE void add_group_halves(const Value (&values)[V], const int (&group)[V], Value (&halves)[2]) {
  halves[0] = halves[1] = Value{};
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    if (group[e] == group[0]) {
      halves[0] = halves[0] + values[e];
    } else {
      halves[1] = halves[1] + values[e];
    }
  }
}

/// The band's columns [first, last] that hold channels of group k, where every vector holds
/// channels of at most two groups, and which half (add_group_halves) of a column is k's.
struct GroupColumns {
  int first, last;

  HIPGRAD_DEVICE static GroupColumns of(int k, int group_channels, int V) {
    return GroupColumns{k * group_channels / V, ((k + 1) * group_channels - 1) / V};
  }
  HIPGRAD_DEVICE int count() const { return last - first + 1; }
  /// 0 where k is the column's first group, 1 where it is its second.
  HIPGRAD_DEVICE static int half(int column, int k, int group_channels, int V) {
    return column * V / group_channels == k ? 0 : 1;
  }
};

/// The fused backward's meeting: the block's per-channel totals of every thread's V per-element
/// `sums` (channel column·V + e), delivered once each as deliver(channel, total), and, where
/// `groups_wanted`, each band group's γ-weighted total over the cluster in group_sums[k]. The lanes
/// of a warp that share a column are added by shuffles and the warps' partials of all V elements
/// land in `scratch` behind one barrier, and beside them each thread's γ-weighted channels added
/// per group, its vector's first and the next (`state`, `group`: its V channels'), which is all
/// a group needs where a vector holds channels of at most two groups (otherwise the group adds its
/// channels' partials, each times γ, from `band_gamma`). Then warp k adds group k's partials (every
/// lane a fixed share, then a butterfly) and lane r stores the block's total into slot `rank` of
/// rank r's `exchange` ([cluster][band groups]); meanwhile the other warps (or, where every warp
/// has a group, all threads after it) add each channel's partials in warp order for `deliver`.
/// After the cluster barrier warp k adds the ranks' totals of group k by a butterfly. Only group
/// totals cross the cluster and only they wait for the meeting: every step between a block's last
/// copy and its first write of dx lengthens the life of every block, and the backward's time
/// follows it (docs/perf-notes.md, step 43). The bits depend on the sizes only. The caller arrives
/// (cluster_arrive_relaxed) at the start of the kernel, so that no block stores into a peer before
/// every peer runs; no block waits for its peers after the meeting. `scratch` holds
/// (V + 2) · ColumnHolders::entries() entries.
template <int V, typename Deliver>
HIPGRAD_DEVICE HIPGRAD_INLINE void cluster_group_sums(GradientSums (&sums)[V], const ChannelState (&state)[V], const int (&group)[V],
                                                      const OneReadRows& m, Index group_channels, int rank,
                                                      const float* band_gamma, GradientSums* scratch, GradientSums* exchange,
                                                      bool groups_wanted, GradientSums* group_sums, Deliver&& deliver) {
  constexpr int width = warp_size();
  const bool two_groups = vector_in_two_groups(group_channels, V);
  const ColumnHolders h = ColumnHolders::of(m);
  GradientSums* const channel_scratch = scratch + 2 * h.entries();  // [e][warp][holder]; the halves before it
  GradientSums weighted[V], halves[2];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) weighted[e] = GradientSums{{state[e].gamma * sums[e][0], state[e].gamma * sums[e][1]}};
  add_group_halves<V>(weighted, group, halves);
  column_shuffles<2>(halves, m);
  column_shuffles<V>(sums, m);
  h.store<2>(halves, 0, 2, scratch);
  h.store<V>(sums, 0, V, channel_scratch);
  block_sync();
  if (m.cluster > 1) cluster_wait();  // every peer has started
  const int warp = static_cast<int>(threadIdx.x) / width, lane = lane_id();
  const int band_groups = groups_wanted ? m.band_groups : 0, gc = static_cast<int>(group_channels);
  // Group k's share of lanes [first_lane, …) in steps of `lanes`: the halves of its columns, or its
  // channels' partials, each times γ.
  const int per_column = h.per_column();
  const auto group_share = [&](int k, int first_lane, int lanes) {
    GradientSums total{{0.0f, 0.0f}};
    if (two_groups) {
      const GroupColumns columns = GroupColumns::of(k, gc, V);
      for (int i = first_lane; i < columns.count() * per_column; i += lanes) {
        const int column = columns.first + i / per_column, at = h.entry(column, i % per_column);
        if (at >= 0) total = total + scratch[GroupColumns::half(column, k, gc, V) * h.entries() + at];
      }
    } else {
      for (int i = first_lane; i < gc * per_column; i += lanes) {
        const int c = k * gc + i / per_column, at = h.entry(c / V, i % per_column);
        if (at >= 0) {
          const GradientSums part = channel_scratch[(c % V) * h.entries() + at];
          total = total + GradientSums{{band_gamma[c] * part[0], band_gamma[c] * part[1]}};
        }
      }
    }
    return total;
  };
  // A warp per group, one group each: the shuffles stay out of loops, which cost the fp16
  // 32×320×64×64 backward 8% (docs/perf-notes.md, step 43). Groups past the warps (small groups in
  // narrow blocks) take a thread each.
  const int group_warps = band_groups < h.warps ? band_groups : h.warps;
  if (warp < group_warps) {
    const GradientSums total = warp_butterfly_sum(group_share(warp, lane, width));
    if (lane < m.cluster) send_to_rank(exchange, rank * band_groups + warp, total, lane, m.cluster);
  }
  for (int k = group_warps + static_cast<int>(threadIdx.x); k < band_groups; k += static_cast<int>(blockDim.x)) {
    send_to_cluster(exchange, rank * band_groups + k, group_share(k, 0, 1), m.cluster);
  }
  // A thread's first channel total is delivered after the cluster barrier: the barrier's release
  // would wait for the stores `deliver` makes (the rest, where a thread has several, go at once).
  const int channels = static_cast<int>(m.columns) * V;
  const int helpers_from = group_warps < h.warps ? group_warps * width : 0, helpers = static_cast<int>(blockDim.x) - helpers_from;
  const int kept_channel = static_cast<int>(threadIdx.x) - helpers_from;
  GradientSums kept{{0.0f, 0.0f}};
  for (int c = kept_channel; c >= 0 && c < channels; c += helpers) {
    const GradientSums total = h.column_total(channel_scratch + (c % V) * h.entries(), c / V);
    if (c == kept_channel) {
      kept = total;
    } else {
      deliver(c, total);
    }
  }
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  if (kept_channel >= 0 && kept_channel < channels) deliver(kept_channel, kept);
  if (warp < group_warps) {
    const GradientSums part = lane < m.cluster ? exchange[lane * band_groups + warp] : GradientSums{{0.0f, 0.0f}};
    const GradientSums total = warp_butterfly_sum(part);
    if (lane == 0) group_sums[warp] = total;
  }
  for (int k = group_warps + static_cast<int>(threadIdx.x); k < band_groups; k += static_cast<int>(blockDim.x))
    group_sums[k] = ranks_total(exchange, k, band_groups, m.cluster);
  block_sync();
}

/// The band's group of each of the thread's V channels.
template <int V>
HIPGRAD_DEVICE HIPGRAD_INLINE void band_groups_of(const StagedLane& l, Index group_channels, int (&group)[V]) {
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) group[e] = static_cast<int>((l.column * V + e) / group_channels);
}


/// The first wave of a staged grid: its clusters start together, copy together, then sum, meet at
/// their cluster barriers and write together, and the blocks that later take their places keep
/// that rhythm, each cluster's blocks held in step by its barrier: the GPU's memory is asked for
/// reads in one phase and writes in another, and the two blocks of a multiprocessor copy and
/// write at the same times. So units [0, units) of the grid, the clusters resident at once, wait
/// (unit mod kStaggerPhases) · step_ns before they start, which spreads the phases of their
/// successors too (docs/perf-notes.md, step 40). The plan staggers only clusters of two or more
/// blocks in grids of several rounds (staged_plan.hpp); clusters exist on NVIDIA sm_90 only.
struct StagedStagger {
  unsigned units = 0;    ///< the units that wait: 0 for none
  unsigned step_ns = 0;  ///< the wait of each phase past the first
};
inline constexpr int kStaggerPhases = 4;

/// This block's wait, as `stagger` says (every block of a cluster waits alike).
HIPGRAD_DEVICE HIPGRAD_INLINE void stagger_start(const StagedStagger& stagger, int cluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  const unsigned unit = blockIdx.x / static_cast<unsigned>(cluster);
  if (unit >= stagger.units) return;
  const unsigned wait = unit % kStaggerPhases * stagger.step_ns;
  if (wait == 0) return;  // the first phase starts at once
  // The global timer counts nanoseconds whatever the clocks do (its low word wraps every 4.3 s,
  // which the unsigned difference survives); the sleeps between its reads leave the
  // multiprocessor to the blocks beside this one.
  unsigned start, now;
  asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(start));
  do {
    sleep_nanoseconds(256);
    asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(now));
  } while (now - start < wait);
#else
  (void)stagger;  // no clusters, so no plan staggers (staged_plan.hpp)
  (void)cluster;
#endif
}

/// Where a cluster's unit lies: sample n, first channel c0, its first group's index into [N, G],
/// and the block's rank in the cluster.
struct StagedUnit {
  Index n, c0, first_group;
  int rank;

  HIPGRAD_DEVICE static StagedUnit of(const Geometry& g, int band_groups, int cluster) {
    const OneReadBlock b = OneReadBlock::of(cluster);
    const Index bands = g.groups / band_groups;
    StagedUnit u;
    u.n = b.unit / bands;
    u.c0 = (b.unit % bands) * band_groups * g.group_channels;
    u.first_group = u.n * g.groups + u.c0 / g.group_channels;
    u.rank = b.rank;
    return u;
  }
};

template <typename T, typename TParam, Activation kActivation>
__global__ void HIPGRAD_STAGED_FORWARD_BOUNDS
    forward_staged_channels_last(const T* __restrict__ x, DeviceStrides xs, T* __restrict__ y, DeviceStrides ys, Geometry g,
                                 OneReadRows m, StagedLayout layout, StagedStagger stagger, const TParam* __restrict__ gamma,
                                 const TParam* __restrict__ beta, float epsilon, float swish_beta,
                                 float* __restrict__ mean, float* __restrict__ rstd) {
  stagger_start(stagger, m.cluster);
  constexpr int V = kVector16<T>;
  using Sums = Array<float, 2>;  // Σ(x − shift), Σ(x − shift)²: a group's count is its size
  extern __shared__ uint4 staged[];
  __shared__ GroupStatistics statistics[kOneReadMaxBandGroups];
  __shared__ float group_shifts[kOneReadMaxBandGroups];
  static_assert(kOneReadMaxBandGroups * (sizeof(GroupStatistics) + sizeof(float)) <= kStagedStaticBytes, "static arrays");
  // The cluster exchanges per-group partials ([cluster][band groups]): a tenth of per-channel
  // ones for 10-channel groups, which is what lets two blocks of a 6-block cluster share a
  // multiprocessor at fp16 32×320×64×64.
  Sums* const exchange = staged_region<Sums>(staged, layout.exchange_at);
  Sums* const scratch = staged_region<Sums>(staged, layout.scratch_at);
  Sums* const channel_totals = staged_region<Sums>(staged, layout.totals_at);
  float* const band_gamma = staged_region<float>(staged, layout.parameters_at);
  float* const band_beta = band_gamma + m.columns * V;
  if (m.cluster > 1) cluster_arrive_relaxed();  // waited for before the first send to a peer
  const StagedUnit u = StagedUnit::of(g, m.band_groups, m.cluster);
  const StagedLane lane = StagedLane::of(m, u.rank, layout.slots);
  const T* unit_x = x + u.n * xs.n + u.c0;
  const T* const bases[1] = {unit_x + lane.column * V};

  int group[V];
  band_groups_of(lane, g.group_channels, group);
  ShiftedSums sums[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) sums[e].shift = type_convert<float>(unit_x[group[e] * g.group_channels]);
  // γ and β of the band, with each group's shift (the block's first row): loaded before the copies
  // are issued (behind them, the loads would wait for every copy; after the cluster barrier, they
  // would be a round trip behind the whole GPU's traffic with every thread waiting), stored to
  // shared memory after, so that no thread waits for them before its copies (7% on fp16 32×320×64×64:
  // docs/perf-notes.md, step 19).
  const bool first_row = threadIdx.x < m.columns;
  float own_gamma[V], own_beta[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    own_gamma[e] = first_row ? type_convert<float>(gamma[u.c0 + lane.column * V + e]) : 0.0f;
    own_beta[e] = first_row ? type_convert<float>(beta[u.c0 + lane.column * V + e]) : 0.0f;
  }
  StagedCopies<1, T> copies = StagedCopies<1, T>::of(staged, lane, bases, g.c, layout.tensor_vectors);
  copies.start(lane);
  if (first_row) {
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) {
      const int c = lane.column * V + e;
      if (c % g.group_channels == 0) group_shifts[group[e]] = sums[e].shift;
      band_gamma[c] = own_gamma[e];
      band_beta[c] = own_beta[e];
    }
  }
  visit_staged(copies, lane, [&](int j) {
    const Vector<T, V> v = staged_vector<V, T>(staged, j);
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) sums[e].add_uncounted(type_convert<float>(v[e]));
  });
  Sums own[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) own[e] = Sums{{sums[e].sums[0], sums[e].sums[1]}};
  // The block's group totals, sent to slot `rank` of every block of the cluster; after the cluster
  // barrier each block adds the ranks' partials of every group in rank order.
  const auto send_group_total = [&](int k, const Sums& total) {
    send_to_cluster(exchange, u.rank * m.band_groups + k, total, m.cluster);
  };
  const ColumnHolders holders = ColumnHolders::of(m);
  if (vector_in_two_groups(g.group_channels, V) && 2 * holders.entries() <= layout.scratch_entries) {
    // Each thread first adds its vector's channels per group, and each group's thread adds the
    // warps' partials of its columns straight from the scratch: one barrier, not two per pass.
    Sums halves[2];
    add_group_halves<V>(own, group, halves);
    column_shuffles<2>(halves, m);
    holders.store<2>(halves, 0, 2, scratch);
    block_sync();
    if (m.cluster > 1) cluster_wait();  // every peer has started
    const int gc = static_cast<int>(g.group_channels);
    for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {
      const GroupColumns columns = GroupColumns::of(k, gc, V);
      Sums total{{0.0f, 0.0f}};
      for (int column = columns.first; column <= columns.last; ++column)
        total = total + holders.column_total(scratch + GroupColumns::half(column, k, gc, V) * holders.entries(), column);
      send_group_total(k, total);
    }
  } else {
    // The block's channel totals, then its group totals (a warp per group adds the group's
    // channels in a fixed butterfly).
    block_column_totals<V>(own, m, scratch, layout.scratch_entries, [&](int c, const Sums& total) { channel_totals[c] = total; });
    block_sync();
    if (m.cluster > 1) cluster_wait();  // every peer has started
    deliver_group_totals(channel_totals, g.group_channels, m.band_groups, send_group_total);
  }
  if (m.cluster > 1) {
    cluster_sync();
  } else {
    block_sync();
  }
  const float group_count = static_cast<float>(g.group_channels * m.positions);
  for (int k = static_cast<int>(threadIdx.x); k < m.band_groups; k += static_cast<int>(blockDim.x)) {
    const Sums total = ranks_total(exchange, k, m.band_groups, m.cluster);
    const Moments moments = ShiftedSums::moments(group_shifts[k], total[0], total[1], group_count);
    statistics[k] = GroupStatistics{moments.mean, 1.0f / sqrtf(moments.variance() + epsilon)};
  }
  block_sync();
  const int thread = static_cast<int>(threadIdx.x);
  if (u.rank == 0 && thread < m.band_groups) store_statistics(statistics[thread], u.first_group + thread, mean, rstd);

  Affine affine[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    const int c = lane.column * V + e;
    const GroupStatistics st = statistics[group[e]];
    affine[e] = make_affine<T>(band_gamma[c] * st.rstd, st.mean, band_beta[c]);
  }
  // A running pointer, as in StagedCopies: a slot costs an add, not a 64-bit row product.
  T* target = y + u.n * ys.n + u.c0 + lane.column * V + lane.first * g.c;
  const Index row_step = lane.step * g.c;
  int j = 0;
  const int pitch = static_cast<int>(blockDim.x);
  const uint4* rows = &staged[threadIdx.x];  // slot j of this thread at rows[j·pitch], as in staged_vector
  if constexpr (kActivation == Activation::kSwish) {
    // 16-bit types: four rows at a time, so that each channel's four values share a reciprocal,
    // with k folded into the affine step (ScaledSwish); the last rows by two and one. fp32 keeps
    // the pairs below: its loop waits for memory, not the special-function units (docs/perf-notes.md,
    // step 32).
    if constexpr (sizeof(T) == 2) {
      const ScaledSwish swish = ScaledSwish::of(swish_beta);
      const float root_count = sqrtf(group_count);
      bool scaled_applies = swish.applies;
      static_assert(!kCenteredAffine<T>, "the scaled loop takes the folded affine step");
      Affine scaled[V];
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e) {
        const int c = lane.column * V + e;
        scaled_applies = scaled_applies && swish.keeps_finite(band_gamma[c], band_beta[c], root_count);
        scaled[e] = scaled_folded(affine[e], swish.k);  // 16-bit data: make_affine folded it
      }
      if (scaled_applies) {
        auto scaled_swish = [k = swish.k](auto& u) { fast_scaled_swish(u, k); };
        for (; j + 3 < lane.valid_slots; j += 4, rows += 4 * pitch, target += 4 * row_step)
          store_swish_rows<4>(rows, pitch, scaled, scaled_swish, target, row_step);
        if (j + 1 < lane.valid_slots) {
          store_swish_rows<2>(rows, pitch, scaled, scaled_swish, target, row_step);
          j += 2, rows += 2 * pitch, target += 2 * row_step;
        }
        if (j < lane.valid_slots) store_swish_rows<1>(rows, pitch, scaled, scaled_swish, target, row_step);
        return;
      }
    }
    // Two rows at a time, so that each channel's two values share a reciprocal.
    const SwishConstants constants = SwishConstants::of(swish_beta);
    auto swish_pair = [constants](float (&z)[2]) { fast_swish_pair(z[0], z[1], constants); };
    for (; j + 1 < lane.valid_slots; j += 2, rows += 2 * pitch, target += 2 * row_step)
      store_swish_rows<2>(rows, pitch, affine, swish_pair, target, row_step);
  }
  for (; j < lane.valid_slots; ++j, rows += pitch, target += row_step) {
    store_vector<V>(target, normalise_vector<kActivation>(*reinterpret_cast<const Vector<T, V>*>(rows), affine, swish_beta));
  }
}

/// Which meeting the staged backward's cluster holds: without an activation, group totals only
/// (cluster_group_sums: each block keeps its own channel totals, `totals` is [N][cluster][C]);
/// with Swish, channel totals (cluster_channel_totals: rank 0 keeps the unit's, `totals` is
/// [N][C]), which ran 3–7% faster there: the Swish kernel is at its register cap, and holding the
/// group halves beside the channel sums cost it more than the exchange (docs/perf-notes.md, step 43).
template <Activation kActivation>
inline constexpr bool kStagedGroupMeeting = kActivation == Activation::kIdentity;

/// The fold blocks of a staged backward's grid (blocks [ready.staged_blocks, gridDim.x)): dγ/dβ
/// from the staged blocks' rows of totals ([N][cluster][C]), each row read once its block has
/// released its flag (TotalsFlags), kGammaBetaChannels channels at a time. They come after every
/// staged block in the grid and are fewer clusters than the GPU holds at once (the plan sees to
/// it), so staged clusters always find room beside fold blocks that wait for them.
template <typename TParam>
HIPGRAD_DEVICE HIPGRAD_INLINE void staged_fold(const GradientSums* totals, int parts, const Geometry& g, const float* rstd,
                                               TParam* dgamma, TParam* dbeta, const TotalsFlags& ready,
                                               GradientSums* row_sums) {
  const Index chunks = (g.c + kGammaBetaChannels - 1) / kGammaBetaChannels;
  const Index fold_blocks = static_cast<Index>(gridDim.x) - ready.staged_blocks;
  for (Index chunk = static_cast<Index>(blockIdx.x) - ready.staged_blocks; chunk < chunks; chunk += fold_blocks) {
    fold_gamma_beta<true>(chunk, totals, parts, g, rstd, dgamma, dbeta, ready, row_sums);
    block_sync();  // row 0 has read `row_sums`
  }
}

/// Fused backward: per-channel (Σdz, Σdz·(x − μ)) (kept in `totals` for dγ/dβ when given: see
/// kStagedGroupMeeting), each group's γ-weighted sums over the unit, then dx (when given) from
/// shared memory. Meeting over groups with dγ/dβ wanted (`ready` has flags), the grid's blocks
/// past ready.staged_blocks fold dγ/dβ (staged_fold); otherwise a kernel after it does.
template <typename T, typename TParam, Activation kActivation>
__global__ void HIPGRAD_STAGED_BACKWARD_BOUNDS
    backward_staged_channels_last(const T* __restrict__ dy, DeviceStrides dys, const T* __restrict__ x, DeviceStrides xs,
                                  T* __restrict__ dx, DeviceStrides dxs, Geometry g, OneReadRows m, StagedLayout layout,
                                  StagedStagger stagger,
                                  const float* __restrict__ mean, const float* __restrict__ rstd,
                                  const TParam* __restrict__ gamma, const TParam* __restrict__ beta, float swish_beta,
                                  GradientSums* __restrict__ totals, TotalsFlags ready, TParam* __restrict__ dgamma,
                                  TParam* __restrict__ dbeta) {
  allow_dependent_grids();  // backward_gamma_beta, where it follows, may be placed as this grid drains
  constexpr int V = kVector16<T>;
  extern __shared__ uint4 staged[];
  if constexpr (kStagedGroupMeeting<kActivation>) {
    if (ready.flags != nullptr && static_cast<Index>(blockIdx.x) >= ready.staged_blocks) {
      // The scratch holds a pair per thread (staged_layout).
      staged_fold(totals, m.cluster, g, rstd, dgamma, dbeta, ready, staged_region<GradientSums>(staged, layout.scratch_at));
      return;
    }
  }
  __shared__ GradientSums group_sums[kOneReadMaxBandGroups];
  static_assert(kOneReadMaxBandGroups * sizeof(GradientSums) <= kStagedStaticBytes, "static arrays");
  // The cluster exchanges per-group totals ([cluster][band groups], cluster_group_sums).
  float* const band_gamma = staged_region<float>(staged, layout.parameters_at);
  stagger_start(stagger, m.cluster);
  if (m.cluster > 1) cluster_arrive_relaxed();  // waited for before the first send to a peer
  const StagedUnit u = StagedUnit::of(g, m.band_groups, m.cluster);
  const StagedLane lane = StagedLane::of(m, u.rank, layout.slots);
  const T* const bases[2] = {x + u.n * xs.n + u.c0 + lane.column * V, dy + u.n * dys.n + u.c0 + lane.column * V};
  // Two chunks in flight for the 16-bit backward with Swish, every chunk at once for the others
  // (docs/perf-notes.md, step 29).
  constexpr int kInFlight = kActivation == Activation::kSwish && sizeof(T) == 2 ? 2 : kStagedChunks;
  auto copies = StagedCopies<2, T, kInFlight>::of(staged, lane, bases, g.c, layout.tensor_vectors);
  copies.start(lane);

  int group[V];
  band_groups_of(lane, g.group_channels, group);
  ChannelState state[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) {
    const Index c = u.c0 + lane.column * V + e;
    const float beta_c = kActivation == Activation::kSwish ? beta_or_zero(beta, c) : 0.0f;
    state[e] = make_channel_state(mean[u.first_group + group[e]], rstd[u.first_group + group[e]],
                                  type_convert<float>(gamma[c]), beta_c);
  }
  if (threadIdx.x < m.columns) {  // the block's first row: γ of the band, for the group sums
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) band_gamma[lane.column * V + e] = state[e].gamma;
  }
  GradientSums sums[V];
  HIPGRAD_UNROLL
  for (int e = 0; e < V; ++e) sums[e] = GradientSums{{0.0f, 0.0f}};
  visit_staged(copies, lane, [&](int j) {
    const Vector<T, V> xv = staged_vector<V, T>(staged, j), dv = staged_vector<V, T>(staged + layout.tensor_vectors, j);
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e)
      accumulate<kActivation>(sums[e], type_convert<float>(dv[e]), type_convert<float>(xv[e]), state[e], swish_beta);
  });
  const bool with_dx = dx != nullptr;  // uniform across the cluster
  GradientSums* const scratch = staged_region<GradientSums>(staged, layout.scratch_at);
  GradientSums* const exchange = staged_region<GradientSums>(staged, layout.exchange_at);
  if constexpr (kStagedGroupMeeting<kActivation>) {
    // Each block's per-channel totals go to its own row of `totals` ([N][cluster][C]).
    cluster_group_sums<V>(sums, state, group, m, g.group_channels, u.rank, band_gamma, scratch, exchange, with_dx, group_sums,
                          [&](int c, const GradientSums& total) {
                            if (totals != nullptr) totals[(u.n * m.cluster + u.rank) * g.c + u.c0 + c] = total;
                          });
    // The block's totals are written (cluster_group_sums ends on a barrier): the grid's fold
    // blocks may take them. Thread 0 waits for their stores before its dx; a release after dx
    // instead held every block until its dx stores landed: 0.1195 against 0.1144 ms here (0.1157
    // without flags; docs/perf-notes.md, step 45).
    if (ready.flags != nullptr && threadIdx.x == 0) release_flag(ready.flags + blockIdx.x, ready.generation);
  } else {
    // The unit's per-channel totals over the cluster; rank 0 keeps them in `totals` ([N][C]).
    GradientSums* const weighted = staged_region<GradientSums>(staged, layout.totals_at);
    cluster_channel_totals<V>(sums, m, u.rank, scratch, layout.scratch_entries, exchange, [&](Index c, const GradientSums& total) {
      if (u.rank == 0 && totals != nullptr) totals[u.n * g.c + u.c0 + c] = total;
      const float gamma_c = band_gamma[c];
      weighted[c] = GradientSums{{gamma_c * total[0], gamma_c * total[1]}};
    });
    if (with_dx) {
      block_sync();
      group_totals(weighted, g.group_channels, m.band_groups, group_sums);
      block_sync();
    }
  }

  if (with_dx) {
    const float inverse_count = 1.0f / static_cast<float>(g.group_channels * g.spatial);
    DataGradient coefficients[V];
    HIPGRAD_UNROLL
    for (int e = 0; e < V; ++e) {
      const GradientSums ab = group_sums[group[e]];
      const float rs = state[e].rstd;
      coefficients[e] = DataGradient{rs * state[e].gamma, -rs * rs * rs * ab[1] * inverse_count, -rs * ab[0] * inverse_count};
    }
    // Rows by product, not a running pointer: the pointer's registers made the 16-bit backward
    // with Swish spill 48 bytes instead of 12 at its 96.
    T* unit_dx = dx + u.n * dxs.n + u.c0 + lane.column * V;
    for (int j = 0; j < lane.valid_slots; ++j) {
      const Vector<T, V> xv = staged_vector<V, T>(staged, j), dv = staged_vector<V, T>(staged + layout.tensor_vectors, j);
      Vector<T, V> out;
      HIPGRAD_UNROLL
      for (int e = 0; e < V; ++e)
        out[e] = type_convert<T>(data_gradient<kActivation>(type_convert<float>(dv[e]), type_convert<float>(xv[e]), state[e],
                                                            coefficients[e], swish_beta));
      store_vector<V>(unit_dx + (lane.first + j * lane.step) * g.c, out);
    }
  }
}

}  // namespace hipgrad::groupnorm::detail
