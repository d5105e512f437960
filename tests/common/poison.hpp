/// @file poison.hpp
/// @brief The poison of outputs in the GPU tests: a NaN whose payload no kernel computes, stored
///        around (and in) an output before a run. A stray read of it that reaches a result makes
///        the result NaN (NaN·0 too), and a stray write shows as changed bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hipgrad/core/numeric_types.hpp"

namespace hipgrad::test {

template <typename T>
T poison_nan() {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>;
  const Bits bits = sizeof(T) == 4 ? Bits(0x7fa5c35au) : std::is_same_v<T, hipgrad::half> ? Bits(0x7e5a) : Bits(0x7fa5);
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace hipgrad::test
