/// @file integer_math.hpp
/// @brief Integer helpers for launch arithmetic, usable on host and device.
#pragma once

#include <cstdint>

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

/// Division of 32-bit unsigned dividends by a divisor fixed on the host, as a multiply-high, an
/// add and a shift (Granlund and Montgomery's round-up method): index arithmetic in kernels
/// divides by the same tensor extents for every element, and a hardware-free integer division
/// costs tens of instructions. Exact for every dividend below 2^32 and every divisor from 1 to
/// 2^32 − 1: with ℓ = ⌈log2 d⌉ and m = ⌊2^32·(2^ℓ − d) / d⌋ + 1 (below 2^32),
/// n / d = (⌊m·n / 2^32⌋ + n) >> ℓ, the sum taken in 64 bits.
class FastDivmod {
 public:
  FastDivmod() = default;
  /// `divisor` ≥ 1 (the caller checks; 0 is taken as 1).
  HIPGRAD_HOST_DEVICE explicit FastDivmod(std::uint32_t divisor) : divisor_(divisor == 0 ? 1 : divisor) {
    while (shift_ < 32 && (std::uint64_t{1} << shift_) < divisor_) ++shift_;
    const std::uint64_t excess = (std::uint64_t{1} << shift_) - divisor_;  // 2^ℓ − d < d
    multiplier_ = static_cast<std::uint32_t>((excess << 32) / divisor_ + 1);
  }

  HIPGRAD_HOST_DEVICE std::uint32_t divisor() const { return divisor_; }

  HIPGRAD_HOST_DEVICE std::uint32_t divide(std::uint32_t n) const {
    const auto high = static_cast<std::uint32_t>((static_cast<std::uint64_t>(multiplier_) * n) >> 32);
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(high) + n) >> shift_);
  }

  /// n / d in *quotient and n mod d in *remainder.
  HIPGRAD_HOST_DEVICE void divmod(std::uint32_t n, std::uint32_t* quotient, std::uint32_t* remainder) const {
    *quotient = divide(n);
    *remainder = n - *quotient * divisor_;
  }

 private:
  std::uint32_t divisor_ = 1;
  std::uint32_t multiplier_ = 1;
  std::uint32_t shift_ = 0;
};

}  // namespace hipgrad
