/// @file strides.hpp
/// @brief Lengths and strides in logical order: packed strides for a memory order, and printing.
///
/// Host-only index math shared by the ops' problem descriptors and the host tools. A layout is a
/// choice of strides: logical [N, C, H, W] stored as NHWC has memory order {0, 2, 3, 1}.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hipgrad {

using Index = std::int64_t;

/// Packed strides for `lengths` laid out in memory with `order` from slowest to fastest, e.g.
/// {0, 2, 3, 1} stores logical [N, C, H, W] as NHWC. The identity order is row-major.
/// Throws std::invalid_argument when `order` is not a permutation of the dimensions (a
/// programming error in the caller, not a property of user data).
inline std::vector<Index> strides_for_order(const std::vector<Index>& lengths, const std::vector<int>& order) {
  if (order.size() != lengths.size())
    throw std::invalid_argument("strides_for_order: order and lengths differ in rank");
  std::vector<Index> strides(lengths.size(), 0);
  std::vector<bool> seen(lengths.size(), false);
  Index stride = 1;
  for (std::size_t i = order.size(); i-- > 0;) {
    const int dim = order[i];
    if (dim < 0 || dim >= static_cast<int>(lengths.size()) || seen[static_cast<std::size_t>(dim)])
      throw std::invalid_argument("strides_for_order: order is not a permutation");
    seen[static_cast<std::size_t>(dim)] = true;
    strides[static_cast<std::size_t>(dim)] = stride;
    stride *= lengths[static_cast<std::size_t>(dim)] > 0 ? lengths[static_cast<std::size_t>(dim)] : 1;
  }
  return strides;
}

/// Row-major packed strides (last dimension fastest).
inline std::vector<Index> packed_strides(const std::vector<Index>& lengths) {
  std::vector<int> order(lengths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  return strides_for_order(lengths, order);
}

/// Whether two distinct indices of a tensor with these lengths and strides may share an element
/// (a written tensor must not): with the dimensions of more than one element ordered by stride,
/// each stride must exceed the span of all smaller ones (Σ (length − 1)·stride). This admits
/// every packed, padded or permuted layout; a layout whose dimensions interleave without
/// overlapping is refused too, which is safe.
inline bool strides_alias(const std::vector<Index>& lengths, const std::vector<Index>& strides) {
  std::vector<std::pair<Index, Index>> dims;  // (stride, length)
  for (std::size_t i = 0; i < lengths.size() && i < strides.size(); ++i) {
    if (lengths[i] > 1) dims.emplace_back(strides[i], lengths[i]);
  }
  std::sort(dims.begin(), dims.end());
  Index span = 0;  // the largest offset reachable through the dimensions before
  for (const auto& [stride, length] : dims) {
    if (stride <= span) return true;
    span += (length - 1) * stride;
  }
  return false;
}

/// "[2, 3, 4]", for messages.
inline std::string lengths_to_string(const std::vector<Index>& lengths) {
  std::string s = "[";
  for (std::size_t i = 0; i < lengths.size(); ++i) s += (i ? ", " : "") + std::to_string(lengths[i]);
  return s + "]";
}

}  // namespace hipgrad
