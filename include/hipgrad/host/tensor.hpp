/// @file tensor.hpp
/// @brief Host tensor: lengths and strides (in elements, any order) over host storage.
///
/// Host-only: no GPU header is needed to use it. Lengths are given in logical order (GroupNorm
/// x as [N, C, spatial...]; conv input as [G, N, C, spatial...]); the memory layout is the
/// choice of strides, for which strides_for_order() builds the packed ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hipgrad/core/strides.hpp"

namespace hipgrad::host {

using hipgrad::Index;
using hipgrad::packed_strides;
using hipgrad::strides_for_order;

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::vector<Index> lengths) : Tensor(lengths, packed_strides(lengths)) {}
  Tensor(std::vector<Index> lengths, std::vector<Index> strides)
      : lengths_(std::move(lengths)), strides_(std::move(strides)) {
    if (lengths_.size() != strides_.size()) throw std::invalid_argument("Tensor: lengths and strides differ in rank");
    for (std::size_t i = 0; i < lengths_.size(); ++i) {
      if (lengths_[i] < 0 || strides_[i] < 0)
        throw std::invalid_argument("Tensor: negative length or stride in dimension " + std::to_string(i));
    }
    storage_.resize(static_cast<std::size_t>(element_space()));
  }

  int rank() const { return static_cast<int>(lengths_.size()); }
  const std::vector<Index>& lengths() const { return lengths_; }
  const std::vector<Index>& strides() const { return strides_; }
  Index length(int dim) const { return lengths_.at(static_cast<std::size_t>(dim)); }
  Index stride(int dim) const { return strides_.at(static_cast<std::size_t>(dim)); }

  /// Number of logical elements (the product of the lengths).
  Index num_elements() const {
    Index n = 1;
    for (Index l : lengths_) n *= l;
    return n;
  }
  /// Elements of storage the strides span: 1 + Σ (length − 1) · stride (0 when empty).
  Index element_space() const {
    if (num_elements() == 0) return 0;
    Index space = 1;
    for (std::size_t i = 0; i < lengths_.size(); ++i) space += (lengths_[i] - 1) * strides_[i];
    return space;
  }

  T* data() { return storage_.data(); }
  const T* data() const { return storage_.data(); }
  std::size_t storage_bytes() const { return storage_.size() * sizeof(T); }
  std::vector<T>& storage() { return storage_; }
  const std::vector<T>& storage() const { return storage_; }

  /// Storage offset of a logical multi-index (rank() entries).
  Index offset(const Index* index) const {
    Index o = 0;
    for (std::size_t i = 0; i < lengths_.size(); ++i) o += index[i] * strides_[i];
    return o;
  }
  Index offset(const std::vector<Index>& index) const { return offset(index.data()); }
  T& operator()(const std::vector<Index>& index) { return storage_[static_cast<std::size_t>(offset(index))]; }
  const T& operator()(const std::vector<Index>& index) const {
    return storage_[static_cast<std::size_t>(offset(index))];
  }
  template <typename... I>
  T& at(I... index) {
    const Index idx[] = {static_cast<Index>(index)...};
    return storage_[static_cast<std::size_t>(offset(idx))];
  }
  template <typename... I>
  const T& at(I... index) const {
    const Index idx[] = {static_cast<Index>(index)...};
    return storage_[static_cast<std::size_t>(offset(idx))];
  }

  /// Calls f(const std::vector<Index>& index) for every logical element, last dimension fastest.
  template <typename F>
  void for_each_index(F&& f) const {
    if (num_elements() == 0) return;
    std::vector<Index> index(lengths_.size(), 0);
    for (;;) {
      f(static_cast<const std::vector<Index>&>(index));
      int d = rank() - 1;
      for (; d >= 0; --d) {
        if (++index[static_cast<std::size_t>(d)] < lengths_[static_cast<std::size_t>(d)]) break;
        index[static_cast<std::size_t>(d)] = 0;
      }
      if (d < 0) return;
    }
  }

 private:
  std::vector<Index> lengths_;
  std::vector<Index> strides_;
  std::vector<T> storage_;
};

}  // namespace hipgrad::host
