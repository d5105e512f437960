/// @file reduce_split_k.hpp
/// @brief The split-K reduction kernel: the fp32 partials of every K split added in split order
///        (deterministic: no atomics) and handed to the epilogue.
#pragma once

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

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
