/// @file epilogue.hpp
/// @brief The tile GEMM's epilogue hook: what happens to each fp32 accumulator. LinearCombination
///        scales (alpha·acc + beta·C), converts to the output type and stores through any two
///        strides, or, for split-K, stores the raw fp32 sum of its K slice as a partial that
///        reduce_split_k adds up in a fixed order (deterministic: no atomics).
///
/// An epilogue is any copyable type with
///   HIPGRAD_DEVICE void store(int m, int n, float accumulator, int split) const;
/// called once per element of the block tile, also for (m, n) outside the problem (it checks).
#pragma once

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

template <typename TOut>
struct LinearCombination {
  TOut* out;  ///< element (m, n) at out[m·stride_m + n·stride_n]
  Index stride_m;
  Index stride_n;
  int m_size;
  int n_size;
  float alpha;
  float beta;       ///< 0: C is not read (it may hold anything, NaN included)
  float* partials;  ///< split-K: null, or [split][m][n] fp32 partial sums to write instead of out

  HIPGRAD_DEVICE HIPGRAD_INLINE void store(int m, int n, float accumulator, int split) const {
    if (m >= m_size || n >= n_size) return;
    if (partials != nullptr) {
      partials[(static_cast<Index>(split) * m_size + m) * n_size + n] = accumulator;
      return;
    }
    TOut* p = out + m * stride_m + n * stride_n;
    float value = alpha * accumulator;
    if (beta != 0.0f) value = fmaf(beta, type_convert<float>(*p), value);
    *p = type_convert<TOut>(value);
  }
};

/// Adds the `splits` partials of each element in split order and hands the sum to `epilogue`
/// (whose own `partials` is null).
template <typename Epilogue>
__global__ void reduce_split_k(const float* partials, int splits, Epilogue epilogue) {
  wait_for_prior_grids();  // a dependent launch (dependent_launch.hpp): before any memory access
  const Index elements = static_cast<Index>(epilogue.m_size) * epilogue.n_size;
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < elements;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (int s = 0; s < splits; ++s) sum += partials[s * elements + i];
    epilogue.store(static_cast<int>(i / epilogue.n_size), static_cast<int>(i % epilogue.n_size), sum, 0);
  }
}

}  // namespace hipgrad::gemm
