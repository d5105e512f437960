/// @file test_core_host.cpp
/// @brief Host side of core/: the software float<->half/bfloat16 conversions, Status, Array,
///        FastDivmod, strides_alias.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "hipgrad/core/array.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"

namespace {

using hipgrad::bfloat16;
using hipgrad::half;
using hipgrad::detail::bit_cast;

std::uint16_t half_bits(float f) { return half(f).bits; }
std::uint16_t bf16_bits(float f) { return bfloat16(f).bits; }

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(half_bits(0.0f), 0x0000);
  EXPECT_EQ(half_bits(-0.0f), 0x8000);
  EXPECT_EQ(half_bits(1.0f), 0x3c00);
  EXPECT_EQ(half_bits(-2.0f), 0xc000);
  EXPECT_EQ(half_bits(65504.0f), 0x7bff);                      // largest finite half
  EXPECT_EQ(half_bits(65519.996f), 0x7bff);                    // just below the rounding midpoint
  EXPECT_EQ(half_bits(65520.0f), 0x7c00);                      // the midpoint rounds (to even) to inf
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -25)), 0x0000);         // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(half_bits(std::ldexp(1.5f, -25)), 0x0001);         // above the tie
  EXPECT_EQ(half_bits(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2 ulps: even is 2
  EXPECT_EQ(half_bits(std::ldexp(1.0f, -14)), 0x0400);         // smallest normal
  EXPECT_EQ(half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie at 1 + half ulp: stays even
  EXPECT_EQ(half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie at 1 + 1.5 ulp: goes to even
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  const std::uint16_t nan = half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(HalfConversion, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const half h = half::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    if (std::isnan(f)) {
      EXPECT_EQ(b & 0x7c00u, 0x7c00u);
      EXPECT_NE(b & 0x3ffu, 0u);
      continue;
    }
    ASSERT_EQ(half(f).bits, b) << "half bits 0x" << std::hex << b;
  }
  EXPECT_EQ(static_cast<float>(half::from_bits(0x0001)), std::ldexp(1.0f, -24));
  EXPECT_EQ(static_cast<float>(half::from_bits(0x03ff)), std::ldexp(1023.0f, -24));
  EXPECT_EQ(static_cast<float>(half::from_bits(0x7bff)), 65504.0f);
}

#if defined(__FLT16_MAX__) && !defined(__CUDACC__)
// The compiler's own _Float16 conversion rounds to nearest even: compare over a dense sweep of
// float bit patterns (every 97th, covering all exponents and many mantissas).
TEST(HalfConversion, MatchesCompilerFloat16) {
  for (std::uint64_t x = 0; x <= 0xffffffffull; x += 97) {
    const float f = bit_cast<float>(static_cast<std::uint32_t>(x));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    ASSERT_EQ(half(f).bits, bit_cast<std::uint16_t>(h)) << "float bits 0x" << std::hex << x;
  }
}
#endif

TEST(Bfloat16Conversion, KnownValues) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16_bits(bit_cast<float>(0x3f808000u)), 0x3f80);  // tie: stays even
  EXPECT_EQ(bf16_bits(bit_cast<float>(0x3f818000u)), 0x3f82);  // tie: rounds up to even
  EXPECT_EQ(bf16_bits(bit_cast<float>(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_bits(bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  const std::uint16_t nan = bf16_bits(bit_cast<float>(0x7f800001u));  // a NaN whose payload would round away
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(b)));
    if (!std::isnan(f)) {
      ASSERT_EQ(bfloat16(f).bits, b);
    }
  }
}

TEST(TypeConvert, BetweenAllTypes) {
  EXPECT_EQ(hipgrad::type_convert<float>(half(3.0f)), 3.0f);
  EXPECT_EQ(hipgrad::type_convert<double>(bfloat16(-5.0f)), -5.0);
  EXPECT_EQ(hipgrad::type_convert<half>(2.5).bits, half(2.5f).bits);
  EXPECT_EQ(hipgrad::type_convert<bfloat16>(half(0.5f)).bits, bfloat16(0.5f).bits);
  EXPECT_EQ(hipgrad::type_convert<int>(7.9f), 7);
  EXPECT_STREQ(hipgrad::type_name<half>(), "fp16");
  EXPECT_STREQ(hipgrad::type_name<bfloat16>(), "bf16");
  EXPECT_STREQ(hipgrad::type_name<float>(), "fp32");
}

TEST(Status, CodesAndMessages) {
  const hipgrad::Status ok;
  EXPECT_TRUE(ok.is_ok());
  EXPECT_EQ(ok.to_string(), "ok");
  const auto bad = hipgrad::Status::invalid_argument("C=30 is not divisible by G=4");
  EXPECT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.code(), hipgrad::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.to_string(), "invalid argument: C=30 is not divisible by G=4");
  EXPECT_EQ(hipgrad::Status::workspace_too_small("x").code(), hipgrad::StatusCode::kWorkspaceTooSmall);
}

hipgrad::Status first_failure(bool fail_first) {
  HIPGRAD_RETURN_IF_ERROR(fail_first ? hipgrad::Status::not_supported("first") : hipgrad::Status::ok());
  HIPGRAD_RETURN_IF_ERROR(hipgrad::Status::runtime_error("second"));
  return hipgrad::Status::ok();
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
  EXPECT_EQ(first_failure(true).message(), "first");
  EXPECT_EQ(first_failure(false).message(), "second");
}

TEST(Array, ElementwiseSumAndMax) {
  const hipgrad::Array<float, 3> a{{1.0f, -2.0f, 3.0f}};
  const hipgrad::Array<float, 3> b{{0.5f, 4.0f, -1.0f}};
  const auto s = a + b;
  const auto m = hipgrad::elementwise_max(a, b);
  EXPECT_EQ(s[0], 1.5f);
  EXPECT_EQ(s[1], 2.0f);
  EXPECT_EQ(s[2], 2.0f);
  EXPECT_EQ(m[0], 1.0f);
  EXPECT_EQ(m[1], 4.0f);
  EXPECT_EQ(m[2], 3.0f);
  EXPECT_EQ((hipgrad::Array<int, 2>::filled(7)[1]), 7);
}

}  // namespace

namespace {

/// FastDivmod(d) against / and % for `n`; returns whether both agree (and reports the first miss).
bool fast_divmod_agrees(std::uint32_t d, std::uint32_t n) {
  const hipgrad::FastDivmod f(d);
  std::uint32_t q = 0, r = 0;
  f.divmod(n, &q, &r);
  const bool ok = q == n / d && r == n % d && f.divide(n) == n / d;
  EXPECT_TRUE(ok) << n << " / " << d << ": got " << q << " rem " << r << ", expected " << n / d << " rem " << n % d;
  return ok;
}

}  // namespace

TEST(FastDivmod, MatchesDivisionForEdgeAndRandomOperands) {
  constexpr std::uint32_t kMax = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> divisors;
  for (std::uint32_t d = 1; d <= 2048; ++d) divisors.push_back(d);
  for (int b = 11; b < 32; ++b) {
    const std::uint32_t p = std::uint32_t{1} << b;
    divisors.insert(divisors.end(), {p - 1, p, p + 1, p + p / 2 + 1});
  }
  divisors.insert(divisors.end(), {641, 6700417, 2147483647u, 2147483648u, 4294967291u, kMax - 1, kMax});
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) divisors.push_back(std::max<std::uint32_t>(1, static_cast<std::uint32_t>(rng())));
  int misses = 0;
  for (std::uint32_t d : divisors) {
    std::vector<std::uint32_t> dividends = {0, 1, 2, d - 1, d, kMax, kMax - 1, kMax - d, 2147483647u, 2147483648u};
    // Around the largest multiples of d, where a multiplier off by one first shows.
    const std::uint32_t top = kMax / d;
    for (std::uint32_t k : {top, top - 1, top / 2, top / 3 + 1})
      if (k > 0) {
        const std::uint64_t m = std::uint64_t{k} * d;
        for (std::int64_t delta = -1; delta <= 1; ++delta) {
          const std::int64_t n = static_cast<std::int64_t>(m) + delta;
          if (n >= 0 && n <= kMax) dividends.push_back(static_cast<std::uint32_t>(n));
        }
      }
    for (int i = 0; i < 64; ++i) dividends.push_back(static_cast<std::uint32_t>(rng()));
    for (std::uint32_t n : dividends) {
      if (!fast_divmod_agrees(d, n) && ++misses > 10) FAIL() << "more than 10 misses";
    }
  }
  for (std::uint32_t n = 0; n < 100000; ++n) {  // every small dividend by small divisors
    for (std::uint32_t d : {3u, 7u, 10u, 12u, 25u, 1000u})
      if (!fast_divmod_agrees(d, n) && ++misses > 10) FAIL() << "more than 10 misses";
  }
  EXPECT_EQ(misses, 0);
  EXPECT_EQ(hipgrad::FastDivmod(0).divisor(), 1u);  // 0 is taken as 1, never a division by zero
}

namespace {

/// Whether two distinct indices reach one offset, by visiting every index (small tensors only).
bool aliases_by_enumeration(const std::vector<hipgrad::Index>& lengths, const std::vector<hipgrad::Index>& strides) {
  std::vector<hipgrad::Index> index(lengths.size(), 0), offsets;
  for (;;) {
    hipgrad::Index offset = 0;
    for (std::size_t d = 0; d < lengths.size(); ++d) offset += index[d] * strides[d];
    offsets.push_back(offset);
    std::size_t d = lengths.size();
    for (; d > 0; --d) {
      if (++index[d - 1] < lengths[d - 1]) break;
      index[d - 1] = 0;
    }
    if (d == 0) break;
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

}  // namespace

/// strides_alias never passes a tensor whose elements share memory (checked against every index),
/// and passes packed, padded and permuted layouts.
TEST(Strides, AliasingStridesAreRefused) {
  using hipgrad::Index;
  EXPECT_FALSE(hipgrad::strides_alias({2, 3, 4}, hipgrad::packed_strides({2, 3, 4})));
  EXPECT_FALSE(hipgrad::strides_alias({2, 3, 4}, hipgrad::strides_for_order({2, 3, 4}, {0, 2, 1})));
  EXPECT_FALSE(hipgrad::strides_alias({2, 3, 4}, {100, 1, 3}));  // padded, permuted
  EXPECT_FALSE(hipgrad::strides_alias({1, 3, 1}, {0, 1, 0}));    // length-1 dimensions may have any stride
  EXPECT_TRUE(hipgrad::strides_alias({2, 3}, {0, 1}));           // a broadcast
  EXPECT_TRUE(hipgrad::strides_alias({2, 3}, {2, 1}));           // rows overlap
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> length(1, 4), stride(0, 12);
  int refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<Index> lengths(3), strides(3);
    for (int d = 0; d < 3; ++d) lengths[d] = length(rng), strides[d] = stride(rng);
    const bool alias = hipgrad::strides_alias(lengths, strides);
    if (aliases_by_enumeration(lengths, strides)) {
      EXPECT_TRUE(alias) << trial;
    }
    refused += alias ? 1 : 0;
  }
  EXPECT_GT(refused, 0);
}
