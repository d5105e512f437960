/// @file conv_test_boxes.hpp
/// @brief What the conv tests of the box paths share on the CPU: a TMA box read through a map's
///        shape as TMA reads it, a store counter that fails on a store outside the tensor, and
///        unpacked strides that keep TMA's 16-byte rule.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "hipgrad/core/strides.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/gemm/device/tensor_map_shape.hpp"
#include "reference/reference_test_util.hpp"

namespace hipgrad::test {

/// The box of `map` at `coords` read from `base` as TMA reads it: dimension 0 fastest, each
/// dimension stepping its element stride, zeros at coordinates outside the map's sizes.
inline std::vector<float> load_box(const gemm::TensorMapShape& map, const float* base, const int* coords) {
  Index count = 1;
  for (int d = 0; d < map.rank; ++d) count *= map.box_elements(d);
  EXPECT_EQ(count * static_cast<Index>(sizeof(float)), map.box_bytes());
  std::vector<float> out(static_cast<std::size_t>(count));
  int b[gemm::TensorMapShape::kMaxRank] = {};
  for (Index e = 0; e < count; ++e) {
    bool inside = true;
    Index bytes = 0;
    for (int d = 0; d < map.rank; ++d) {
      const Index x = static_cast<Index>(coords[d]) + static_cast<Index>(b[d]) * map.element_stride[d];
      inside = inside && x >= 0 && x < map.size[d];
      bytes += x * map.stride_bytes[d];
    }
    out[static_cast<std::size_t>(e)] =
        inside ? *reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) + bytes) : 0.0f;
    for (int d = 0; d < map.rank; ++d) {
      if (++b[d] < map.box_elements(d)) break;
      b[d] = 0;
    }
  }
  return out;
}

/// Counts a store to storage element `element`; a failure, and false, where it lies outside the
/// storage, so that a wrong offset fails the test instead of writing past the tensor.
inline bool count_store(std::vector<int>& stores, std::ptrdiff_t element) {
  if (element < 0 || element >= static_cast<std::ptrdiff_t>(stores.size())) {
    ADD_FAILURE() << "a store at storage element " << element << ", outside the tensor's " << stores.size();
    return false;
  }
  ++stores[static_cast<std::size_t>(element)];
  return true;
}

/// Strides of `lengths` stored in `order` (slowest first), each dimension marked in `gap` padded
/// to a multiple of 4 elements and 4 more: unpacked, but every stride a multiple of 16 bytes
/// where the unpadded ones are.
inline std::vector<Index> gapped_strides(const std::vector<Index>& lengths, const std::vector<int>& order,
                                         const std::vector<bool>& gap) {
  std::vector<Index> s(lengths.size(), 0);
  Index stride = 1;
  for (std::size_t i = order.size(); i-- > 0;) {
    const auto dim = static_cast<std::size_t>(order[i]);
    s[dim] = stride;
    Index l = std::max<Index>(lengths[dim], 1);
    if (gap[dim]) l = (l + 3) / 4 * 4 + 4;
    stride *= l;
  }
  return s;
}

/// A tensor of integers in [−4, 4], its gaps NaN.
inline host::Tensor<float> filled_integers(const std::vector<Index>& lengths, const std::vector<Index>& strides,
                                           std::mt19937_64& rng) {
  host::Tensor<float> t(lengths, strides);
  std::fill(t.storage().begin(), t.storage().end(), std::numeric_limits<float>::quiet_NaN());
  fill_integers(t, rng, -4, 4);
  return t;
}

/// The storage elements of t's logical elements, each marked 1 (the gaps 0).
template <typename T>
std::vector<int> logical_elements(const host::Tensor<T>& t) {
  std::vector<int> marked(t.storage().size(), 0);
  std::vector<Index> at(t.lengths().size(), 0);
  for (Index e = 0; e < t.num_elements(); ++e) {
    Index rest = e;
    for (std::size_t d = at.size(); d-- > 0;) at[d] = rest % t.lengths()[d], rest /= t.lengths()[d];
    marked[static_cast<std::size_t>(t.offset(at))] = 1;
  }
  return marked;
}

}  // namespace hipgrad::test
