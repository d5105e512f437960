/// @file groupnorm_test_util.hpp
/// @brief Shared by the GroupNorm GPU tests: the data/parameter type pairings they run over, device
///        copies of host tensors (a failed allocation or copy ends the test), and inputs that expose
///        the reductions.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad_test {

template <typename T, typename TP>
struct TypePair {
  using Data = T;    ///< x, dy, y, dx
  using Param = TP;  ///< γ, β, dγ, dβ
};

/// fp32, fp16 and bf16 data, each with parameters in its own type or in fp32 (fp32 only once).
using GroupNormTypePairs =
    ::testing::Types<TypePair<float, float>, TypePair<hipgrad::half, hipgrad::half>, TypePair<hipgrad::half, float>,
                     TypePair<hipgrad::bfloat16, float>, TypePair<hipgrad::bfloat16, hipgrad::bfloat16>>;

/// Ends the current test when `st` is an error. Usable where ASSERT_* is not (constructors,
/// functions returning a value): GoogleTest reports the exception as the test's failure and goes
/// on with the next test, so a failed allocation never carries on with a null buffer.
inline void require(const hipgrad::Status& st, const std::string& what) {
  if (!st.is_ok()) throw std::runtime_error(what + ": " + st.to_string());
}

/// A device copy of t's storage (padding included).
template <typename T>
hipgrad::host::DeviceBuffer<T> upload(const hipgrad::host::Tensor<T>& t) {
  hipgrad::host::DeviceBuffer<T> b;
  require(b.allocate(t.storage().size()), "allocation of a device copy");
  require(b.copy_from(t), "copy to the device");
  return b;
}

/// `like` with its storage overwritten by b's.
template <typename T>
hipgrad::host::Tensor<T> download(const hipgrad::host::DeviceBuffer<T>& b, hipgrad::host::Tensor<T> like) {
  require(b.copy_to(like), "copy from the device");
  return like;
}

/// How many of the `count` elements at `data` that are not marked in `logical` no longer hold the
/// 0xff poison in every one of their bytes.
template <typename T>
std::int64_t written_outside(const T* data, std::size_t count, const std::vector<bool>& logical) {
  std::int64_t written = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (logical[i]) continue;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data + i);
    for (std::size_t b = 0; b < sizeof(T); ++b)
      if (bytes[b] != 0xff) {
        ++written;
        break;
      }
  }
  return written;
}

/// How a test's x and dy are drawn.
enum class Data {
  kIntegers,         ///< fill(): integers in [−5, 5], independent, mean 0
  kDecimals,         ///< fill(): decimals in [−1, 1), independent, mean 0
  kGroupedIntegers,  ///< fill_exposing_reductions, integer-valued
  kGroupedDecimals,  ///< fill_exposing_reductions, decimals
};

inline const char* data_name(Data d) {
  switch (d) {
    case Data::kIntegers: return "integers";
    case Data::kDecimals: return "decimals";
    case Data::kGroupedIntegers: return "grouped integers";
    case Data::kGroupedDecimals: return "grouped decimals";
  }
  return "unknown";
}

inline hipgrad::host::InitMethod init_of(Data d) {
  return d == Data::kIntegers || d == Data::kGroupedIntegers ? hipgrad::host::InitMethod::kIntegers
                                                             : hipgrad::host::InitMethod::kDecimals;
}

namespace detail {

/// A value drawn for (seed, key): an integer in [lo, hi], or a decimal in [lo, hi).
inline double draw(std::uint64_t seed, std::uint64_t key, std::int64_t lo, std::int64_t hi, bool integers) {
  namespace hd = hipgrad::host::detail;
  const std::uint64_t bits = hd::element_bits(seed, key);
  if (integers) return static_cast<double>(hd::uniform_integer(bits, lo, hi));
  return static_cast<double>(lo) + static_cast<double>(hi - lo) * hd::unit_interval(bits);
}

}  // namespace detail

/// x and dy ([N, C, spatial...]) whose group reductions are of the order of the group size, so
/// that a kernel that drops or misplaces part of a reduction is off by O(1), not by O(1/√n) as
/// with independent zero-mean data:
///  * x = m[n, g] + o[c] + ramp(position) + noise: a mean per group, an offset per channel, and a
///    ramp over the spatial positions (so that the blocks that split a group's rows or channels
///    hold different partial sums);
///  * dy = a[n, g] + b[n, g]·(x − m[n, g]) + noise: a mean, and a component along x̂, so that Σdy and
///    Σdy·x̂ over a group (and over a channel, for dβ and dγ) are O(n).
/// dy may be null (a forward's test). Integer-valued (|x| ≤ 7, |dy| ≤ 8: exact in every storage type) or decimals of the same sizes;
/// where a channel has more than 512 values, dy is scaled by a power of two so that Σ|dy|·|x̂| over
/// a channel stays below 2^14, and dγ, dβ within fp16's range (dy stays exact: a few significant
/// bits times a power of two). Each value is a function of the seed and its logical index,
/// whatever the layouts.
template <typename T>
void fill_exposing_reductions(hipgrad::host::Tensor<T>& x, hipgrad::host::Tensor<T>* dy, hipgrad::Index groups,
                              bool integers, std::uint64_t seed) {
  using hipgrad::Index;
  namespace ref = hipgrad::host::reference::groupnorm_detail;
  const Index n_count = x.length(0), channels = x.length(1), group_channels = channels / groups;
  const Index positions = x.num_elements() / (n_count * channels);
  const ref::Addressing x_at(x), dy_at(dy ? *dy : x);
  double dy_scale = 1;
  while (32.0 * static_cast<double>(n_count * positions) * dy_scale > 16384.0) dy_scale /= 2;
  for (Index n = 0; n < n_count; ++n)
    for (Index c = 0; c < channels; ++c) {
      const std::uint64_t group_key = static_cast<std::uint64_t>(n * groups + c / group_channels);
      const double m = detail::draw(seed, group_key, -3, 3, integers);
      const double o = detail::draw(seed + 1, static_cast<std::uint64_t>(c), -1, 1, integers);
      const double a = detail::draw(seed + 3, group_key, -2, 2, integers);
      // b = ±1 for integers, ±[0.5, 1) for decimals: never near 0.
      double b = detail::draw(seed + 4, group_key, 0, 1, integers);
      b = integers ? 2 * b - 1 : (b < 0.5 ? -0.5 - b : b);
      for (Index s = 0; s < positions; ++s) {
        const std::uint64_t key = static_cast<std::uint64_t>((n * channels + c) * positions + s);
        // A ramp from −2 to 1 (in four steps for integers) across the positions.
        const double ramp = integers ? static_cast<double>(4 * s / positions) - 2
                                     : 3.0 * static_cast<double>(s) / static_cast<double>(positions) - 2;
        const double xv = m + o + ramp + detail::draw(seed + 2, key, -1, 1, integers);
        x.data()[x_at(n, c, s)] = hipgrad::type_convert<T>(xv);
        if (!dy) continue;
        const double dyv = a + b * (xv - m) + detail::draw(seed + 5, key, -2, 2, integers);
        dy->data()[dy_at(n, c, s)] = hipgrad::type_convert<T>(dy_scale * dyv);
      }
    }
}

/// Fills x and dy (unless null) as `data` says (fill() for the independent kinds, with seeds seed
/// and seed + 1).
template <typename T>
void fill_data(hipgrad::host::Tensor<T>& x, hipgrad::host::Tensor<T>* dy, hipgrad::Index groups, Data data,
               std::uint64_t seed) {
  if (data == Data::kIntegers || data == Data::kDecimals) {
    hipgrad::host::fill(x, init_of(data), seed);
    if (dy) hipgrad::host::fill(*dy, init_of(data), seed + 1);
  } else {
    fill_exposing_reductions(x, dy, groups, data == Data::kGroupedIntegers, seed);
  }
}

}  // namespace hipgrad_test
