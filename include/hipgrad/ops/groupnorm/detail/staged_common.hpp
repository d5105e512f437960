/// @file staged_common.hpp
/// @brief What the staged channels-last kernels (staged_forward_kernels.hpp, staged_backward_kernels.hpp) share:
///        their limits, the layout of a block's dynamic shared memory, the asynchronous copies of
///        a unit into it, the stagger of the first wave and where a unit lies. A staged kernel
///        copies each unit of a packed channels-last tensor (NHWC and kin) into shared memory,
///        sums it there and writes the output from there: x (and dy) leave memory once, as in
///        one_read_channels_last_kernels.hpp, but the data sit in shared memory rather than registers.
///
/// Why a second one-read design: holding the unit in registers forces narrow per-thread accesses
/// (pairs of channels, so that a thread's channels stay in one group) and plain loads whose
/// registers are live until the sums are done, which capped the reads in flight; a channels-last
/// band of 10-channel groups measured slower than three-pass that way. Here every thread copies
/// 16-byte vectors with asynchronous copies (cp.async on sm_80 and later: no registers held, every
/// copy of the block in flight at once), and keeps per-channel constants for the vector's V channels, whichever groups they belong to.
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

#include "hipgrad/ops/groupnorm/detail/one_read_channels_last_kernels.hpp"
#include "hipgrad/primitives/async_copy.hpp"

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
/// sums or writes, ran faster than one block with twice the staging or with more threads.
/// sm_90a, ptxas: the forwards spill nothing (52–76 bytes at 64 registers), the 16-bit backward
/// with Swish 56 bytes, the other backwards nothing.
inline constexpr int kStagedForwardRegisters = 80, kStagedForwardPairThreads = 384;
inline constexpr int kStagedBackwardRegisters = 96, kStagedBackwardPairThreads = 320;
static_assert(2 * kStagedForwardPairThreads * kStagedForwardRegisters <= 65536, "two blocks fit the register file");
static_assert(2 * kStagedBackwardPairThreads * kStagedBackwardRegisters <= 65536, "two blocks fit the register file");
#define HIPGRAD_STAGED_FORWARD_BOUNDS HIPGRAD_MAX_REGISTERS(kStagedForwardRegisters, kStagedMaxThreads)
#define HIPGRAD_STAGED_BACKWARD_BOUNDS HIPGRAD_MAX_REGISTERS(kStagedBackwardRegisters, kStagedMaxThreads)

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
  int column;       ///< 16-byte vector column of the band
  int slots;        ///< rows per thread (uniform over the block)
  Index first;      ///< the thread's first row (position)
  Index step;       ///< rows_per_step
  Index end;        ///< one past the block's last row
  int valid_slots;  ///< slots [0, valid_slots) hold rows of the tensor

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
  // 16-bit backward with Swish spill 104–112 bytes at its 96.
  const T* source[kTensors];
  uint4* target;
  Index row_step;
  int tensor_vectors;

  HIPGRAD_DEVICE static StagedCopies of(uint4* staged, const StagedLane& l, const T* const (&bases)[kTensors],
                                        Index pitch, int tensor_vectors) {
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
    // slower.
    for (int j = l.chunk_begin(k), end = l.chunk_end(k); j < end; ++j) {
      HIPGRAD_UNROLL
      for (int t = 0; t < kTensors; ++t) {
        copy_chunk(target + t * tensor_vectors, source[t], 16);
        source[t] += row_step;
      }
      target += threads;
    }
    commit_copies();
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
    case 3: wait_copies<3>(); break;
    case 2: wait_copies<2>(); break;
    case 1: wait_copies<1>(); break;
    default: wait_copies<0>(); break;
  }
}

/// visit(slot) for each valid slot, chunk by chunk as the chunk lands; with the first kInFlight
/// chunks started (StagedCopies::start), each landed chunk starts the next one, so that at most
/// kInFlight are in flight. Two in flight made the 16-bit backward with Swish faster and the
/// other staged kernels no faster.
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

/// The first wave of a staged grid: its clusters start together, copy together, then sum, meet at
/// their cluster barriers and write together, and the blocks that later take their places keep
/// that rhythm, each cluster's blocks held in step by its barrier: the GPU's memory is asked for
/// reads in one phase and writes in another, and the two blocks of a multiprocessor copy and
/// write at the same times. So units [0, units) of the grid, the clusters resident at once, wait
/// (unit mod kStaggerPhases) · step_ns before they start, which spreads the phases of their
/// successors too. The plan staggers only clusters of two or more
/// blocks in grids of several rounds (staged_plan.hpp); clusters exist on NVIDIA sm_90 only.
struct StagedStagger {
  unsigned units = 0;    ///< the units that wait: 0 for none
  unsigned step_ns = 0;  ///< the wait of each phase past the first
};
inline constexpr int kStaggerPhases = 4;

/// This block's wait, as `stagger` says (every block of a cluster waits alike).
HIPGRAD_DEVICE HIPGRAD_INLINE void stagger_start(const StagedStagger& stagger, int cluster) {
  const unsigned unit = blockIdx.x / static_cast<unsigned>(cluster);
  if (unit >= stagger.units) return;  // no stagger planned (always so without clusters)
  const unsigned wait = unit % kStaggerPhases * stagger.step_ns;
  if (wait > 0) wait_nanoseconds(wait);  // the first phase starts at once
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

}  // namespace hipgrad::groupnorm::detail
