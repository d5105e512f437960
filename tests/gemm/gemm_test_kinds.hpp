/// @file gemm_test_kinds.hpp
/// @brief What the GEMM test files share: the element kinds they run (fp32 exact and TF32,
///        fp16, bf16) and the tolerance of decimal data.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/check.hpp"

namespace gemm_test {

/// A data type and whether fp32 may use TF32.
template <typename T, bool kTf32 = false>
struct Kind {
  using Type = T;
  static constexpr bool kAllowTf32 = kTf32;
};
using Kinds = ::testing::Types<Kind<float>, Kind<float, true>, Kind<hipgrad::half>, Kind<hipgrad::bfloat16>>;

/// Whether a Kind is fp32 without TF32 (the SIMT path only). A function, not a constant
/// expression, so that the tests that skip it do not read as unreachable code to the compiler.
template <typename K>
bool is_exact_fp32() {
  return std::is_same_v<typename K::Type, float> && !K::kAllowTf32;
}

/// Tolerance for decimal data: that of sums of K products of inputs in [-1, 1), and for TF32 the
/// reduction of each input to a 10-bit mantissa: relative 2^-11 each when rounded (mma.sync), and
/// with wgmma one operand rounded and the one read from shared memory truncated (below 2^-10), so
/// at most 1.5·2^-10 per product of inputs in [-1, 1], on average (|ab| = 1/4) well under 2^-10;
/// the per-product errors add like a random walk, and 2^-9·√K covers twice it (the largest of
/// ~10^5 elements lies beyond 4 standard deviations).
template <typename T>
hipgrad::host::Tolerance decimal_tolerance(hipgrad::Index k, bool tf32) {
  hipgrad::host::Tolerance t = hipgrad::host::sum_tolerance<T>(k);
  if (tf32) {
    t.rtol += 0x1.0p-10;
    t.atol += 0x1.0p-9 * std::sqrt(static_cast<double>(k));
  }
  return t;
}

}  // namespace gemm_test
