/// @file box_operands.hpp
/// @brief What both conv ops' box paths share (backward_data_tma.hpp, backward_weight_tma.hpp):
///        the 128-byte rows of a TMA tile, the tensor maps' size in the workspace, a box grid of
///        positions for the device, and the panel operands of the box producer.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/ops/conv/common/position_boxes.hpp"
#include "hipgrad/gemm/device/tensor_map_shape.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"

namespace hipgrad::conv::detail {

/// A K tile's channels: one 128-byte row of a 128-byte swizzled tile.
inline constexpr int kTmaRowBytes = 128;

/// Bytes of a tensor map in device memory (CUtensorMap).
inline constexpr int kTensorMapBytes = 128;

/// PositionBoxes for the device: a tile's first grid point and a row's grid point by fast
/// division, 32-bit (a sub-problem's tiles × rows fit an int: the grouped launch checks).
template <int NDim>
struct BoxGrid {
  static constexpr int kDims = NDim + 1;
  FastDivmod boxes[kDims];  ///< boxes per dimension (n, i_1, …)
  FastDivmod shape[kDims];  ///< grid points of a box per dimension
  int extent[kDims];

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void origin(int tile, int* first) const {
    std::uint32_t rest = static_cast<std::uint32_t>(tile), quotient = 0, box = 0;
    HIPGRAD_UNROLL
    for (int d = kDims - 1; d >= 0; --d) {
      boxes[d].divmod(rest, &quotient, &box);
      first[d] = static_cast<int>(box * shape[d].divisor());
      rest = quotient;
    }
  }

  /// The grid point of row r of the box at `first`; false past the grid or the box's rows.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool point(const int* first, int row, int* at) const {
    std::uint32_t rest = static_cast<std::uint32_t>(row), quotient = 0, within = 0;
    bool inside = true;
    HIPGRAD_UNROLL
    for (int d = kDims - 1; d >= 0; --d) {
      shape[d].divmod(rest, &quotient, &within);
      at[d] = first[d] + static_cast<int>(within);
      inside = inside && at[d] < extent[d];
      rest = quotient;
    }
    return inside && rest == 0;
  }
};

template <int NDim>
BoxGrid<NDim> box_grid(const PositionBoxes<NDim>& boxes) {
  BoxGrid<NDim> g{};
  for (int d = 0; d <= NDim; ++d) {
    g.boxes[d] = FastDivmod(static_cast<std::uint32_t>(boxes.boxes[d]));
    g.shape[d] = FastDivmod(static_cast<std::uint32_t>(boxes.shape[d]));
    g.extent[d] = static_cast<int>(boxes.extent[d]);
  }
  return g;
}

/// What every panel operand of the box producer shares (backward-data's w, backward-weight's dy
/// and x): per K tile one box copy per 128-byte panel of the block's MN, panel_bytes apart in
/// the stage, at the coordinates Derived::coordinates(mn_base, k_base, p, c) makes.
template <typename Derived, typename T>
struct PanelBoxes {
  using Element = T;
  static constexpr bool kKContiguous = false;
  static constexpr int kPanelElements = kTmaRowBytes / static_cast<int>(sizeof(T));
  const void* map;  ///< the operand's tensor map (gemm::TensorMap), in device memory
  int panels;       ///< the block's 128-byte panels along MN
  int panel_bytes;  ///< a panel's bytes in the stage
  int mn_extent;
  int k_extent;  ///< K tiles × bk

  HIPGRAD_HOST_DEVICE int mn_size() const { return mn_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return k_extent; }
  HIPGRAD_HOST_DEVICE int tile_bytes() const { return panels * panel_bytes; }
  HIPGRAD_HOST_DEVICE int copies() const { return panels; }

  HIPGRAD_DEVICE HIPGRAD_INLINE void load_copy(int p, char* tile, int mn_base, int k_base,
                                               std::uint64_t* barrier) const {
    int c[gemm::TensorMapShape::kMaxRank];
    const int rank = static_cast<const Derived*>(this)->coordinates(mn_base, k_base, p, c);
    gemm::tma_load_box(tile + p * panel_bytes, static_cast<const gemm::TensorMap*>(map), c, rank, barrier);
  }
};

}  // namespace hipgrad::conv::detail
