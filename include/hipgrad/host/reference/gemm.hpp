/// @file gemm.hpp
/// @brief CPU reference of the GEMM: C = alpha·A·B + beta·C0 in double, for matrices of any
///        strides (row-major, column-major, padded).
///
/// Host-only. A is [M, K], B [K, N], C0 and the result [M, N], in logical order. Every result
/// element is one sequential loop over k in one thread, so results are the same for any thread
/// count and any layout.
#pragma once

#include <stdexcept>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/parallel.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::host::reference {

/// The packed [M, N] double result. With beta == 0, `c0` is not read (it may be empty).
template <typename T, typename TC>
Tensor<double> gemm(const Tensor<T>& a, const Tensor<T>& b, double alpha, double beta, const Tensor<TC>& c0) {
  if (a.rank() != 2 || b.rank() != 2 || a.length(1) != b.length(0)) {
    throw std::invalid_argument("reference::gemm: A must be [M, K] and B [K, N]");
  }
  const Index m = a.length(0), n = b.length(1), k = a.length(1);
  if (beta != 0 && (c0.rank() != 2 || c0.length(0) != m || c0.length(1) != n)) {
    throw std::invalid_argument("reference::gemm: C must be [M, N] when beta != 0");
  }
  Tensor<double> c({m, n});
  parallel_for(0, m, [&](Index i) {
    for (Index j = 0; j < n; ++j) {
      double sum = 0;
      for (Index p = 0; p < k; ++p) sum += type_convert<double>(a.at(i, p)) * type_convert<double>(b.at(p, j));
      c.at(i, j) = alpha * sum + (beta != 0 ? beta * type_convert<double>(c0.at(i, j)) : 0.0);
    }
  });
  return c;
}

}  // namespace hipgrad::host::reference
