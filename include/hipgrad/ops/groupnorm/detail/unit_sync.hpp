/// @file unit_sync.hpp
/// @brief How the L2-reread GroupNorm kernels hand statistics between warps: indices claimed in
///        order, a write-once slot per tile partial, and each unit's partials folded in order.
///
/// One kernel does both passes of a GroupNorm. Its warps claim indices i = 0, 1, 2, ... from one
/// counter; for each index a warp
///  1. (i < tiles) loads tile i from memory and stores the tile's partial in its slot;
///  2. (i ≥ lag) finishes tile j = i − lag: takes the statistics of j's unit (the tiles of one
///     (n, group), contiguous in tile order), folding the unit's partials in tile order when no
///     warp has stored them yet, so the result does not depend on which warp folds, and writes
///     the output of tile j, reading its inputs again, from L2 when the lag's tiles fit there.
/// Why it cannot deadlock: a warp waits only in step 2, for partials of the unit of tile i − lag;
/// with lag ≥ tiles per unit, that unit ends before tile i, so its tiles were claimed before i,
/// by warps that store a partial before they wait for anything.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hipgrad/core/cross_block.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/groupnorm/detail/channel_tiles_reduce.hpp"

namespace hipgrad::groupnorm::detail {

/// Threads per block of the L2-reread kernels; each warp of a block is an independent worker.
inline constexpr int kRereadThreads = 256;

/// 8-byte slots that are written once: all ones until then (the workspace is set to 0xff before
/// the launch). A value whose bits happen to be all ones (a NaN) is stored as the canonical NaN.
/// Readers poll the slot itself, so no fence and no separate ready flag is needed: an aligned
/// 8-byte store is seen whole or not at all.
inline constexpr std::uint64_t kPending = ~std::uint64_t{0};

template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE void store_once(T* slot, const T& value) {
  static_assert(sizeof(T) == 8 && std::is_trivially_copyable_v<T>, "slots hold 8 bytes");
  std::uint64_t bits;
  std::memcpy(&bits, &value, 8);
  if (bits == kPending) bits = 0x7fffffff7fffffffull;
  *reinterpret_cast<volatile std::uint64_t*>(slot) = bits;
}

/// The slot's value once it is written (spins until then); `ready` false leaves it unread.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE bool load_if_written(const T* slot, T* value) {
  const std::uint64_t bits = *reinterpret_cast<const volatile std::uint64_t*>(slot);
  if (bits == kPending) return false;
  std::memcpy(value, &bits, 8);
  return true;
}

template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T wait_written(const T* slot) {
  T value;
  while (!load_if_written(slot, &value)) spin_pause();
  return value;
}

/// Workspace of one L2-reread launch, all set to 0xff before it: the claim counter (whose first
/// claim wraps to 0), a slot per tile for its partial and a slot per unit for its statistics.
template <typename Partial, typename Result>
struct UnitSync {
  unsigned* counter;
  Partial* partials;  ///< [tiles]
  Result* results;    ///< [units]
  Index unit_tiles;
  Index lag;          ///< ≥ unit_tiles

  /// The next index for this warp (every lane gets it). The counter starts at all ones.
  HIPGRAD_DEVICE Index claim() const {
    unsigned index = 0;
    if (lane_id() == 0) index = atomic_add(counter, 1u) + 1u;
    return static_cast<Index>(shfl(index, 0));
  }

  /// Step 1's hand-over: lane 0's `partial` for `tile`.
  HIPGRAD_DEVICE void publish(Index tile, const Partial& partial) const {
    if (lane_id() == 0) store_once(partials + tile, partial);
  }

  /// Step 2's statistics of `unit` in every lane: the stored result, or fold() (warp-wide, result
  /// in lane 0; it waits for the partials it reads), which is then stored. Several warps may fold
  /// the same unit: they store the same bits.
  template <typename Fold>
  HIPGRAD_DEVICE Result statistics(Index unit, Fold fold) const {
    Result result{};
    bool stored = false;
    if (lane_id() == 0) stored = load_if_written(results + unit, &result);
    if (!shfl(stored, 0)) {
      result = fold();
      if (lane_id() == 0) {
        store_once(results + unit, result);
        load_if_written(results + unit, &result);  // the stored bits (a canonicalised NaN), as others see them
      }
    }
    return shfl(result, 0);
  }
};

/// Lanes × [channels, tiles] fold of one unit's partials, warp-wide: per channel over its tiles
/// (then `visit(c, channel_total)` in one lane), then over channels of `weigh(c, channel_total)`.
/// `load(c, k)` gives the partial of channel c's tile k. The order of every combination depends
/// on the sizes only. Returns the unit total in lane 0.
template <typename State, typename Load, typename Op, typename Weigh, typename Visit>
HIPGRAD_DEVICE State fold_unit(Load load, Index channels, Index tiles, const State& identity, Op op, Weigh weigh,
                               Visit visit) {
  constexpr int kLanes = warp_size();
  constexpr int kBatch = 4;  // loads in flight per lane: a long fold is a chain of L2 round trips otherwise
  const int tile_lanes = tile_lanes_for<kLanes>(channels, tiles);
  const int channel_lanes = kLanes / tile_lanes;
  const int lane = lane_id(), tl = lane % tile_lanes, cl = lane / tile_lanes;
  State unit = identity;
  for (Index batch = 0; batch < channels; batch += channel_lanes) {
    const Index c = batch + cl;
    State folded = identity;
    if (c < channels) {
      for (Index k0 = tl; k0 < tiles; k0 += kBatch * tile_lanes) {
        State values[kBatch];
        HIPGRAD_UNROLL
        for (int b = 0; b < kBatch; ++b) {
          const Index k = k0 + static_cast<Index>(b) * tile_lanes;
          values[b] = k < tiles ? load(c, k) : identity;
        }
        HIPGRAD_UNROLL
        for (int b = 0; b < kBatch; ++b) folded = op(folded, values[b]);
      }
    }
    for (int stride = tile_lanes / 2; stride > 0; stride /= 2) {
      const State other = shfl_down(folded, stride);
      if (tl < stride) folded = op(folded, other);
    }
    if (tl == 0 && c < channels) {
      visit(c, folded);
      unit = op(unit, weigh(c, folded));
    }
  }
  for (int stride = channel_lanes / 2; stride > 0; stride /= 2) {
    const State other = shfl_down(unit, stride * tile_lanes);
    if (cl < stride) unit = op(unit, other);
  }
  return unit;
}

}  // namespace hipgrad::groupnorm::detail
