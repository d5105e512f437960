/// @file heuristics.hpp
/// @brief Host: kAuto's choices for backward-data — which tiles each path runs for a problem's
///        channels, and where the box path may run.
#pragma once

#include <type_traits>

#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/common/plain_gemm.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// Whether dy's k and w's c are contiguous: vectors (and boxes) run along them.
template <int NDim>
bool data_channels_contiguous(const Problem<NDim>& problem) {
  return problem.output_strides[2] == 1 && problem.weight_strides[2] == 1;
}

/// Whether kAuto may take the box path for `problem` (before what the pointers and the device
/// allow): fp16/bf16 only (TF32's swapped product gives up the gather path's operand order and
/// loses to it), and not the plain GEMM of a 1×1 problem.
template <typename T, int NDim>
bool auto_may_run_data_boxes(const Problem<NDim>& problem) {
  return problem.algorithm == Algorithm::kAuto && sizeof(T) == 2 && !is_plain_gemm(problem) &&
         data_channels_contiguous(problem);
}

/// Backward-data's tile configurations: Wide for the matrix paths, Narrow for products of at
/// most Narrow::kBlockN columns (C), Thin for the box path's of at most Thin::kBlockN. A path
/// takes the narrowest configuration as wide as C, so that no block computes columns past it.
template <typename Wide_, typename Narrow, typename Thin>
struct DataTiles {
  using Wide = Wide_;
  static constexpr int kThinTile = 0, kNarrowTile = 1, kWideTile = 2;

  static int gather_tile(Index c) {
    return !std::is_same_v<Wide, Narrow> && c <= Narrow::kBlockN ? kNarrowTile : kWideTile;
  }
  static int box_tile(Index c) {
    if (!std::is_same_v<Thin, Narrow> && c <= Thin::kBlockN) return kThinTile;
    return gather_tile(c);
  }

  /// visit(Cfg{}) with the gather path's configuration `tile` (Narrow or Wide).
  template <typename Visit>
  static auto with_gather_tile(int tile, Visit&& visit) {
    if constexpr (!std::is_same_v<Wide, Narrow>) {
      if (tile == kNarrowTile) return visit(Narrow{});
    }
    return visit(Wide{});
  }
  /// visit(Cfg{}) with the box path's configuration `tile` (Thin, Narrow or Wide).
  template <typename Visit>
  static auto with_box_tile(int tile, Visit&& visit) {
    if constexpr (!std::is_same_v<Thin, Narrow>) {
      if (tile == kThinTile) return visit(Thin{});
    }
    return with_gather_tile(tile, visit);
  }
};

}  // namespace hipgrad::conv::detail
