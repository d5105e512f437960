/// @file numeric_types.hpp
/// @brief half and bfloat16 storage types with float conversions on host and device.
///
/// Both are 16-bit structs, layout-compatible with the vendor types (`__half`, `_Float16`,
/// `__nv_bfloat16`, `hip_bfloat16`): pointers to those may be reinterpreted. Arithmetic is done
/// in float: hipgrad loads 16-bit values, converts, accumulates in fp32 and converts back.
/// Conversions from float round to nearest even, keep NaN a NaN and overflow to infinity, the same
/// on host and device (the device uses the hardware conversion where there is one; the tests
/// compare the two over every input).
#pragma once

#include <cstdint>
#include <type_traits>

#include "hipgrad/core/config.hpp"

namespace hipgrad {

namespace detail {

/// The bits of `from` as a `To`. `__builtin_memcpy`, not `std::memcpy`: on AMD, hip-clang
/// declares the device `memcpy` in the HIP runtime headers, so where a user's `<cstring>` comes
/// before them, `std::memcpy` names only the host function and device code fails to compile.
template <typename To, typename From>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  To to;
  __builtin_memcpy(&to, &from, sizeof(To));
  return to;
}

/// IEEE binary32 -> binary16, round to nearest even, in integer arithmetic.
HIPGRAD_HOST_DEVICE inline std::uint16_t float_to_half_bits_soft(float value) {
  const std::uint32_t x = bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t exponent = (x >> 23) & 0xffu;
  std::uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) {  // inf stays inf; NaN stays a (quiet) NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? (0x200u | (mantissa >> 13)) : 0u));
  }
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (half_exponent <= 0) {  // subnormal half (or zero)
    if (half_exponent < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000u;  // the implicit leading one
    const int shift = 14 - half_exponent;
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  std::uint32_t result = sign | (static_cast<std::uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  const std::uint32_t remainder = mantissa & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent (and 65520.0f up to infinity).
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(result);
}

/// IEEE binary16 -> binary32 (exact).
HIPGRAD_HOST_DEVICE inline float half_bits_to_float_soft(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal half: normalise
    std::uint32_t float_exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --float_exponent;
    }
    bits = sign | (float_exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return bit_cast<float>(bits);
}

/// binary32 -> bfloat16, round to nearest even; NaN stays a quiet NaN.
HIPGRAD_HOST_DEVICE inline std::uint16_t float_to_bfloat16_bits_soft(float value) {
  std::uint32_t x = bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float bfloat16_bits_to_float(std::uint16_t b) {
#if defined(__CUDA_ARCH__)
  // One instruction the compiler does not see through, as cvt.f32.f16 for half: otherwise it
  // keeps the widened floats of register-held data alive across a kernel's phases (twice the
  // registers, and spills), instead of widening again where they are used.
  float f;
  asm("mov.b32 %0, {0, %1};" : "=f"(f) : "h"(b));
  return f;
#else
  return bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
#endif
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::uint16_t float_to_half_bits(float value) {
#if defined(__CUDA_ARCH__)
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value));
  return h;
#elif defined(__HIP_DEVICE_COMPILE__)
  return bit_cast<std::uint16_t>(static_cast<_Float16>(value));
#else
  return float_to_half_bits_soft(value);
#endif
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float half_bits_to_float(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#elif defined(__HIP_DEVICE_COMPILE__)
  return static_cast<float>(bit_cast<_Float16>(h));
#else
  return half_bits_to_float_soft(h);
#endif
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::uint16_t float_to_bfloat16_bits(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  std::uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(value));
  return b;
#else
  return float_to_bfloat16_bits_soft(value);
#endif
}

}  // namespace detail

/// IEEE binary16.
struct half {
  std::uint16_t bits;

  half() = default;
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE explicit half(float value) : bits(detail::float_to_half_bits(value)) {}
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE explicit operator float() const { return detail::half_bits_to_float(bits); }
  HIPGRAD_HOST_DEVICE static HIPGRAD_INLINE half from_bits(std::uint16_t b) {
    half h;
    h.bits = b;
    return h;
  }
};

/// bfloat16: the upper half of an IEEE binary32.
struct bfloat16 {
  std::uint16_t bits;

  bfloat16() = default;
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE explicit bfloat16(float value) : bits(detail::float_to_bfloat16_bits(value)) {}
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE explicit operator float() const { return detail::bfloat16_bits_to_float(bits); }
  HIPGRAD_HOST_DEVICE static HIPGRAD_INLINE bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(half) == 2 && std::is_trivially_copyable_v<half>, "half must be a 16-bit POD");
static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>, "bfloat16 must be a 16-bit POD");

/// Converts between float, double, half and bfloat16 (through float for the 16-bit types).
template <typename To, typename From>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE To type_convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<From, half> || std::is_same_v<From, bfloat16>) {
    return type_convert<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, half> || std::is_same_v<To, bfloat16>) {
    return To(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

template <typename T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <typename T>
inline constexpr bool is_storage_type_v = std::is_same_v<T, float> || is_16bit_float_v<T>;

/// Short names used in configuration names, CLI options and test names.
template <typename T>
constexpr const char* type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "fp32";
  else if constexpr (std::is_same_v<T, half>)
    return "fp16";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bf16";
  else if constexpr (std::is_same_v<T, double>)
    return "fp64";
  else if constexpr (std::is_same_v<T, int>)
    return "int32";
  else
    static_assert(sizeof(T) == 0, "type_name: no name for this type");
}

}  // namespace hipgrad
