/// @file fill.hpp
/// @brief Seeded, layout-independent initialisation of host tensors (the examples' `init`).
///
/// Host-only. The value of an element is a function of (seed, logical index) alone, where the
/// logical index counts elements in for_each_index() order (last dimension fastest). Two tensors
/// with the same lengths and seed therefore hold the same logical data whatever their strides, so
/// an NHWC run can be compared with an NCHW run element by element. Values come from a
/// splitmix64-style hash computed in 64-bit integer arithmetic: no std::*_distribution (whose
/// output differs between standard libraries), so the data are the same on every platform.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::host {

/// The examples' `init` argument.
enum class InitMethod {
  kNone = 0,      ///< leave the storage as it is
  kIntegers = 1,  ///< integers in [-5, 5]: exact in every storage type, so fp16/bf16 sums can be exact
  kDecimals = 2,  ///< decimals in [-1, 1)
};

inline const char* init_method_name(InitMethod method) {
  switch (method) {
    case InitMethod::kNone: return "none";
    case InitMethod::kIntegers: return "integers";
    case InitMethod::kDecimals: return "decimals";
  }
  return "unknown";
}

namespace detail {

inline constexpr std::uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ull;

/// The splitmix64 output function: a bijection on 64-bit words with good avalanche.
inline std::uint64_t mix64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Random bits for one element. The seed is mixed first so that neighbouring seeds give
/// unrelated sequences rather than the same sequence shifted by one element.
inline std::uint64_t element_bits(std::uint64_t seed, std::uint64_t logical_index) {
  return mix64(mix64(seed ^ 0x6a09e667f3bcc909ull) + (logical_index + 1) * kGoldenGamma);
}

/// A fresh draw after a rejected one; still a function of the element's first draw only.
inline std::uint64_t next_bits(std::uint64_t bits) { return mix64(bits + kGoldenGamma); }

/// Uniform in [0, 1): the top 53 bits scaled by 2^-53, exact in double.
inline double unit_interval(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// Uniform integer in [lo, hi] without modulo bias: draws in the top partial block of 2^64
/// values are rejected and redrawn.
inline std::int64_t uniform_integer(std::uint64_t bits, std::int64_t lo, std::int64_t hi) {
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);  // hi - lo, mod 2^64
  if (span == ~0ull) return static_cast<std::int64_t>(bits);                                   // the whole int64 range
  const std::uint64_t count = span + 1;
  const std::uint64_t limit = ~0ull - (~0ull % count + 1) % count;  // largest multiple of count, minus 1
  while (bits > limit) bits = next_bits(bits);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + bits % count);
}

/// Calls f(element, logical index) for every logical element of t.
template <typename T, typename F>
void for_each_logical(Tensor<T>& t, F&& f) {
  std::uint64_t logical = 0;
  t.for_each_index([&](const std::vector<Index>& index) { f(t(index), logical++); });
}

}  // namespace detail

/// Integers drawn uniformly from [lo, hi] (the bounds may come in either order), converted to T.
/// Integers beyond T's exact range (2048 for fp16, 256 for bf16) are rounded by the conversion.
template <typename T>
void fill_integers(Tensor<T>& t, std::int64_t lo, std::int64_t hi, std::uint64_t seed) {
  if (lo > hi) std::swap(lo, hi);
  detail::for_each_logical(t, [&](T& element, std::uint64_t logical) {
    const std::int64_t value = detail::uniform_integer(detail::element_bits(seed, logical), lo, hi);
    if constexpr (std::is_integral_v<T>) {
      element = static_cast<T>(value);  // through double, 64-bit values would round
    } else {
      element = type_convert<T>(static_cast<double>(value));
    }
  });
}

/// Values drawn uniformly from [lo, hi) (the bounds may come in either order), converted to T.
/// Rounding to a narrow T can land a value on hi or below lo; such draws are redrawn so that the
/// stored values really lie in [lo, hi). When no T value lies there, the rounded draw is kept.
template <typename T>
void fill_uniform(Tensor<T>& t, double lo, double hi, std::uint64_t seed) {
  if (lo > hi) std::swap(lo, hi);
  constexpr int kMaxDraws = 64;
  detail::for_each_logical(t, [&](T& element, std::uint64_t logical) {
    std::uint64_t bits = detail::element_bits(seed, logical);
    T value = type_convert<T>(lo);
    for (int draw = 0; draw < kMaxDraws; ++draw, bits = detail::next_bits(bits)) {
      value = type_convert<T>(lo + (hi - lo) * detail::unit_interval(bits));
      const double stored = type_convert<double>(value);
      if (stored >= lo && (stored < hi || lo == hi)) break;
    }
    element = value;
  });
}

/// Initialises every logical element of t with `method` (kNone leaves the storage untouched,
/// including the gaps that padded strides leave between elements).
template <typename T>
void fill(Tensor<T>& t, InitMethod method, std::uint64_t seed) {
  switch (method) {
    case InitMethod::kNone: return;
    case InitMethod::kIntegers: fill_integers(t, -5, 5, seed); return;
    case InitMethod::kDecimals: fill_uniform(t, -1.0, 1.0, seed); return;
  }
}

}  // namespace hipgrad::host
