/// @file stage_kernels.hpp
/// @brief Device: the staged route's copy (staged.hpp) between a tensor at the caller's strides and
///        its channels-last form with padded channels in the workspace, and its host launch. A
///        tensor is [A, B, channels, positions] on both sides (activations: A = G, B = N; weights:
///        A = G, B = K); the copy transposes tiles of channels × positions through shared memory,
///        so that both sides are read and written along their contiguous dimension, in 16-byte
///        vectors where whole and aligned.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/vector_access.hpp"

namespace hipgrad::conv::detail {

/// Elements of a staging tile (channels × positions, both powers of two) and threads of a block.
inline constexpr int kStageTile = 2048;
inline constexpr int kStageThreads = 256;

/// The copy of one tensor. Staged: [A, B, channels, positions] with channel stride 1 and the
/// other strides `staged`; the caller's: the same dimensions, its own strides `caller`, and
/// extents b_used ≤ b and channels_used ≤ channels (the staged form pads both with zeros).
template <typename T>
struct StageParams {
  const T* from = nullptr;
  T* to = nullptr;
  bool spread = true;  ///< caller → staged (zeros in the padding); else staged → caller (its elements only)
  std::int64_t a = 1, b = 1, channels = 1, positions = 1;  ///< staged extents
  std::int64_t b_used = 1, channels_used = 1;              ///< the caller's
  std::int64_t caller[4] = {};                             ///< strides of a, b, channel, position
  std::int64_t staged[3] = {};                             ///< strides of a, b, position
  bool caller_along_channels = false;  ///< the caller's side is walked along channels (else positions)
  bool caller_vectors = false;         ///< and in aligned 16-byte vectors that way (stride 1, the rest whole vectors)
  int channel_shift = 5;               ///< log2 of a tile's channels (8, 16 or 32)
  std::int64_t channel_tiles = 1, position_tiles = 1, tiles = 1;
};

/// The caller's offset and the staged offset of element (a, b, channel, position).
template <typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t caller_offset(const StageParams<T>& p, std::int64_t a, std::int64_t b,
                                                              std::int64_t c, std::int64_t x) {
  return a * p.caller[0] + b * p.caller[1] + c * p.caller[2] + x * p.caller[3];
}
template <typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t staged_offset(const StageParams<T>& p, std::int64_t a, std::int64_t b,
                                                              std::int64_t c, std::int64_t x) {
  return a * p.staged[0] + b * p.staged[1] + x * p.staged[2] + c;
}

/// Run r of a tile of 2^channel_shift channels (runs of one 16-byte vector): its first element,
/// walked along channels or positions.
struct TileRun {
  int channel, position;
};
template <int kRun>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TileRun tile_run(int r, int channel_shift, bool along_channels) {
  const int position_shift = 11 - channel_shift;  // kStageTile = 2^11
  if (along_channels) {
    const int runs = (1 << channel_shift) / kRun;
    return {(r % runs) * kRun, r / runs};
  }
  const int runs = (1 << position_shift) / kRun;
  return {r / runs, (r % runs) * kRun};
}

/// One side of a copy: where element (c, x) of the tile's (a, b) lies, whether it exists, and
/// whether a whole run from it is one aligned vector.
template <typename T>
struct StageSide {
  const StageParams<T>& p;
  bool caller;
  std::int64_t a, b;
  HIPGRAD_DEVICE HIPGRAD_INLINE std::int64_t offset(std::int64_t c, std::int64_t x) const {
    return caller ? caller_offset(p, a, b, c, x) : staged_offset(p, a, b, c, x);
  }
  HIPGRAD_DEVICE HIPGRAD_INLINE bool exists(std::int64_t c, std::int64_t x) const {
    return x < p.positions && (caller ? b < p.b_used && c < p.channels_used : c < p.channels);
  }
  /// Whether the run of kVector16<T> elements from (c, x) along channels (or positions) is one
  /// aligned vector: the side walks memory that way in vectors, and the run's last element exists.
  /// The staged side is walked along its channels only.
  HIPGRAD_DEVICE HIPGRAD_INLINE bool whole_run(std::int64_t c, std::int64_t x, bool along_channels) const {
    constexpr int kLast = kVector16<T> - 1;
    if (!caller) return exists(c + kLast, x);
    if (!p.caller_vectors || along_channels != p.caller_along_channels) return false;
    return along_channels ? exists(c + kLast, x) : exists(c, x + kLast);
  }
};

/// One tile per block and pass: each thread loads runs of the source side (16-byte vectors where
/// whole and aligned) into shared memory, a padded row per channel, then stores runs of the other
/// side, each side walked along its contiguous dimension. Values move as bits; padding is +0.
template <typename T>
__global__ void __launch_bounds__(kStageThreads) stage_kernel(const StageParams<T> p) {
  using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint32_t>;
  constexpr int kRun = kVector16<T>;
  constexpr int kRuns = kStageTile / (kStageThreads * kRun);
  __shared__ Bits tile[kStageTile + 32];
  const int row = (1 << (11 - p.channel_shift)) + 1;
  const bool load_along_channels = p.spread ? p.caller_along_channels : true;
  const bool store_along_channels = p.spread ? true : p.caller_along_channels;
  const auto* from = reinterpret_cast<const Bits*>(p.from);
  auto* to = reinterpret_cast<Bits*>(p.to);
  for (std::int64_t t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const std::int64_t position0 = (t % p.position_tiles) << (11 - p.channel_shift);
    std::int64_t rest = t / p.position_tiles;
    const std::int64_t channel0 = (rest % p.channel_tiles) << p.channel_shift;
    rest /= p.channel_tiles;
    const std::int64_t b = rest % p.b, a = rest / p.b;
    const StageSide<T> source{p, p.spread, a, b}, target{p, !p.spread, a, b};
    Vector<Bits, kRun> values[kRuns];
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const TileRun r =
          tile_run<kRun>(static_cast<int>(threadIdx.x) + j * kStageThreads, p.channel_shift, load_along_channels);
      const std::int64_t c = channel0 + r.channel, x = position0 + r.position;
      if (source.whole_run(c, x, load_along_channels)) {
        values[j] = load_vector<kRun>(from + source.offset(c, x));
        continue;
      }
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        const std::int64_t ci = load_along_channels ? c + i : c, xi = load_along_channels ? x : x + i;
        values[j][i] = source.exists(ci, xi) ? from[source.offset(ci, xi)] : Bits{0};
      }
    }
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const TileRun r =
          tile_run<kRun>(static_cast<int>(threadIdx.x) + j * kStageThreads, p.channel_shift, load_along_channels);
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        const int ci = load_along_channels ? r.channel + i : r.channel;
        const int xi = load_along_channels ? r.position : r.position + i;
        tile[ci * row + xi] = values[j][i];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kRuns; ++j) {
      const TileRun r =
          tile_run<kRun>(static_cast<int>(threadIdx.x) + j * kStageThreads, p.channel_shift, store_along_channels);
      const std::int64_t c = channel0 + r.channel, x = position0 + r.position;
      Vector<Bits, kRun> v;
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        const int ci = store_along_channels ? r.channel + i : r.channel;
        const int xi = store_along_channels ? r.position : r.position + i;
        v[i] = tile[ci * row + xi];
      }
      if (target.whole_run(c, x, store_along_channels)) {
        store_vector<kRun>(to + target.offset(c, x), v);
        continue;
      }
#pragma unroll
      for (int i = 0; i < kRun; ++i) {
        const std::int64_t ci = store_along_channels ? c + i : c, xi = store_along_channels ? x : x + i;
        if (target.exists(ci, xi)) to[target.offset(ci, xi)] = v[i];
      }
    }
    __syncthreads();
  }
}

/// Launches the copy of `p` (from and to set) on `stream`: 16 blocks per multiprocessor at most,
/// each walking tiles.
template <typename T>
Status launch_stage(const StageParams<T>& p, int multiprocessors, hipStream_t stream) {
  const std::int64_t blocks = std::min<std::int64_t>(p.tiles, std::int64_t{16} * std::max(multiprocessors, 1));
  stage_kernel<T><<<static_cast<unsigned>(std::max<std::int64_t>(blocks, 1)), kStageThreads, 0, stream>>>(p);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("stage_kernel");
  return Status::ok();
}

}  // namespace hipgrad::conv::detail
