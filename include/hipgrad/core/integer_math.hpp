/// @file integer_math.hpp
/// @brief Integer helpers for launch arithmetic, usable on host and device.
#pragma once

#include "hipgrad/core/config.hpp"

namespace hipgrad {

/// ⌈a / b⌉ for a ≥ 0, b > 0.
template <typename Int>
HIPGRAD_HOST_DEVICE constexpr Int ceil_div(Int a, Int b) {
  return (a + b - 1) / b;
}

/// The least multiple of `granule` that is ≥ value (value ≥ 0, granule > 0).
template <typename Int>
HIPGRAD_HOST_DEVICE constexpr Int round_up(Int value, Int granule) {
  return ceil_div(value, granule) * granule;
}

template <typename Int>
HIPGRAD_HOST_DEVICE constexpr Int greatest_common_divisor(Int a, Int b) {
  return b == 0 ? a : greatest_common_divisor(b, a % b);
}

}  // namespace hipgrad
