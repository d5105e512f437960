/// @file epilogue.hpp
/// @brief The tile GEMM's epilogue hook: what happens to each fp32 accumulator. LinearCombination
///        scales (alpha·acc + beta·C), converts to the output type and stores through any two
///        strides, or, for split-K, stores the raw fp32 sum of its K slice as a partial that
///        reduce_split_k (kernel/reduce_split_k.hpp) adds up in a fixed order (deterministic: no
///        atomics).
///
/// An epilogue is any copyable type with
///   HIPGRAD_DEVICE void store(int m, int n, float accumulator, int split) const;
/// called once per element of the block tile, also for (m, n) outside the problem (it checks),
/// and optionally
///   HIPGRAD_DEVICE void store_vector(int m, int n, const float* accumulators, int split) const;
/// for kEpilogueVector consecutive n of one m (store's result for each; such an epilogue also
/// names its extents, int m_size and n_size, and stores nothing outside them), which the
/// warp-specialised kernel calls instead from a tile staged in shared memory, so that an output
/// row gets one 16-byte store where it can rather than eight of an element each.
#pragma once

#include <type_traits>
#include <utility>

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/core/vector_access.hpp"

namespace hipgrad::gemm {

/// The accumulators an epilogue's store_vector takes: consecutive n of one m.
inline constexpr int kEpilogueVector = 8;

/// Whether Epilogue has store_vector.
template <typename Epilogue, typename = void>
struct EpilogueStoresVectors : std::false_type {};
template <typename Epilogue>
struct EpilogueStoresVectors<Epilogue, std::void_t<decltype(std::declval<const Epilogue&>().store_vector(
                                           0, 0, static_cast<const float*>(nullptr), 0))>> : std::true_type {};

/// Stores alpha·values[0..kEpilogueVector) converted to TOut at `out`, which is aligned for
/// 16-byte stores, in 16-byte stores.
template <typename TOut>
HIPGRAD_DEVICE HIPGRAD_INLINE void store_scaled_vector(TOut* out, const float* values, float alpha) {
  constexpr int kPer = kVector16<TOut>;
  static_assert(kEpilogueVector % kPer == 0, "a store vector is whole 16-byte stores");
  HIPGRAD_UNROLL
  for (int h = 0; h < kEpilogueVector / kPer; ++h) {
    Vector<TOut, kPer> v;
    HIPGRAD_UNROLL
    for (int j = 0; j < kPer; ++j) v[j] = type_convert<TOut>(alpha * values[h * kPer + j]);
    hipgrad::store_vector<kPer>(out + h * kPer, v);
  }
}

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

  /// One 16-byte store (two for fp32) where the n run lies inside a contiguous, aligned row
  /// and C is not read; element by element otherwise.
  HIPGRAD_DEVICE HIPGRAD_INLINE void store_vector(int m, int n, const float* accumulators, int split) const {
    if (m >= m_size) return;
    if (n + kEpilogueVector <= n_size) {
      if (partials != nullptr) {
        float* p = partials + (static_cast<Index>(split) * m_size + m) * n_size + n;
        if (is_vector_aligned<float, 4>(p)) return store_scaled_vector(p, accumulators, 1.0f);
      } else if (stride_n == 1 && beta == 0.0f) {
        TOut* p = out + m * stride_m + n;
        if (is_vector_aligned<TOut, kVector16<TOut>>(p)) return store_scaled_vector(p, accumulators, alpha);
      }
    }
    for (int j = 0; j < kEpilogueVector; ++j) store(m, n + j, accumulators[j], split);
  }
};

}  // namespace hipgrad::gemm
