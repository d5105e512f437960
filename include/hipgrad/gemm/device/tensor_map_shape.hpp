/// @file tensor_map_shape.hpp
/// @brief A tiled tensor map as its dimensions, byte strides and box, on any backend and without
///        the driver: ops plan maps of up to five dimensions with it (a convolution's operands),
///        tensor_map_blocker checks TMA's rules on the host, and tests read boxes through it as
///        TMA would.
///
/// Dimension 0 is the contiguous one (stride_bytes[0] is the element size). A box of the map at
/// coordinates c (signed: a box may start before the tensor) lands in shared memory densely,
/// dimension 0 fastest; its elements at coordinates outside [0, size) read as zeros, and the
/// copy counts the whole box's bytes whatever part of it lies outside. Along dimension d > 0 a
/// box may step element_stride[d] (1 to 8) coordinates at a time: it then brings
/// ⌈box[d] / element_stride[d]⌉ elements, at c[d], c[d] + element_stride[d], ….
#pragma once

#include <cstdint>

#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

struct TensorMapShape {
  static constexpr int kMaxRank = 5;
  static constexpr int kMaxBox = 256;
  int rank = 0;
  int element_bytes = 0;
  Index size[kMaxRank] = {};
  Index stride_bytes[kMaxRank] = {};
  int box[kMaxRank] = {};
  int element_stride[kMaxRank] = {1, 1, 1, 1, 1};

  /// Elements a box brings along dimension d.
  int box_elements(int d) const { return (box[d] + element_stride[d] - 1) / element_stride[d]; }

  /// Bytes one box copy brings (and a transaction barrier must expect).
  Index box_bytes() const {
    Index bytes = element_bytes;
    for (int d = 0; d < rank; ++d) bytes *= box_elements(d);
    return bytes;
  }
};

/// Why TMA cannot read tensor maps of this shape at `base` with a 128-byte swizzle (null when it
/// can): rank 1 to 5, sizes 1 to 2^32, dimension 0 contiguous, the other strides multiples of 16
/// bytes below 2^40, a 16-byte aligned base, boxes of 1 to 256 elements a dimension whose first
/// dimension is a multiple of 16 bytes and at most 128 (one swizzled row), element strides of 1
/// to 8 (1 along dimension 0).
inline const char* tensor_map_blocker(const TensorMapShape& s, const void* base) {
  if (s.rank < 1 || s.rank > TensorMapShape::kMaxRank) return "a tensor map has 1 to 5 dimensions";
  if (reinterpret_cast<std::uintptr_t>(base) % 16 != 0) return "a tensor map's base must be 16-byte aligned";
  if (s.stride_bytes[0] != s.element_bytes) return "a tensor map's first dimension must be contiguous";
  for (int d = 0; d < s.rank; ++d) {
    if (s.size[d] < 1 || s.size[d] > (Index{1} << 32)) return "a tensor map's sizes are 1 to 2^32";
    if (s.box[d] < 1 || s.box[d] > TensorMapShape::kMaxBox) return "a tensor map's box is 1 to 256 elements a dimension";
    if (d > 0 && (s.stride_bytes[d] % 16 != 0 || s.stride_bytes[d] <= 0)) {
      return "a tensor map's strides must be positive multiples of 16 bytes";
    }
    if (d > 0 && s.stride_bytes[d] >= (Index{1} << 40)) return "a tensor map's strides are below 2^40 bytes";
    if (s.element_stride[d] < 1 || s.element_stride[d] > 8 || (d == 0 && s.element_stride[d] != 1)) {
      return "a tensor map steps 1 to 8 elements a dimension (1 along the first)";
    }
  }
  const Index row_bytes = static_cast<Index>(s.box[0]) * s.element_bytes;
  if (row_bytes % 16 != 0 || row_bytes > 128) return "a tensor map's box rows must be 16 to 128 bytes in 16-byte steps";
  return nullptr;
}

}  // namespace hipgrad::gemm
