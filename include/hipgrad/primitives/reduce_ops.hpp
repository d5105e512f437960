/// @file reduce_ops.hpp
/// @brief Reduction operators for the warp and block reductions: sum and max, on scalars and on
///        hipgrad::Array (element-wise), so that several values reduce in one call.
#pragma once

#include "hipgrad/core/array.hpp"
#include "hipgrad/core/config.hpp"

namespace hipgrad {

struct SumOp {
  template <typename T>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE T operator()(const T& a, const T& b) const {
    return a + b;
  }
};

struct MaxOp {
  template <typename T>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
  template <typename T, int N>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Array<T, N> operator()(const Array<T, N>& a, const Array<T, N>& b) const {
    return elementwise_max(a, b);
  }
};

/// sum/max/all_sum/all_max for a reducer class that defines reduce(value, op) and
/// all_reduce(value, op) (WarpReduce, BlockReduce): the shortcuts are written once here.
template <typename Reducer, typename T>
class ReductionShortcuts {
 public:
  HIPGRAD_DEVICE HIPGRAD_INLINE T sum(const T& value) { return self().reduce(value, SumOp{}); }
  HIPGRAD_DEVICE HIPGRAD_INLINE T max(const T& value) { return self().reduce(value, MaxOp{}); }
  HIPGRAD_DEVICE HIPGRAD_INLINE T all_sum(const T& value) { return self().all_reduce(value, SumOp{}); }
  HIPGRAD_DEVICE HIPGRAD_INLINE T all_max(const T& value) { return self().all_reduce(value, MaxOp{}); }

 private:
  HIPGRAD_DEVICE HIPGRAD_INLINE Reducer& self() { return static_cast<Reducer&>(*this); }
};

}  // namespace hipgrad
