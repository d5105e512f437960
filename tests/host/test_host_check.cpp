/// @file test_host_check.cpp
/// @brief host::check_close / check_equal / averaged_tolerance / sum_tolerance: planted errors are
///        caught at the right index, non-finite values and mismatched lengths fail, layouts and
///        types mix, the bounds follow the math.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/tensor.hpp"

namespace {

using hipgrad::bfloat16;
using hipgrad::half;
using hipgrad::type_convert;
using hipgrad::host::averaged_tolerance;
using hipgrad::host::check_close;
using hipgrad::host::check_equal;
using hipgrad::host::CheckResult;
using hipgrad::host::fill;
using hipgrad::host::Index;
using hipgrad::host::InitMethod;
using hipgrad::host::strides_for_order;
using hipgrad::host::sum_tolerance;
using hipgrad::host::Tensor;
using hipgrad::host::Tolerance;
using Indices = std::vector<Index>;

constexpr Tolerance kTol{1e-3, 1e-4};

/// A [2, 3, 4] float tensor and its double reference holding the same values.
struct Pair {
  Tensor<float> result{Indices{2, 3, 4}};
  Tensor<double> reference{Indices{2, 3, 4}};
  Pair() {
    fill(result, InitMethod::kDecimals, 3);
    result.for_each_index([&](const Indices& i) { reference(i) = result(i); });
  }
};

int count_lines(const std::string& s) {
  int lines = 1;
  for (char c : s) lines += c == '\n';
  return lines;
}

TEST(HostCheckClose, EqualDataPass) {
  Pair p;
  const CheckResult c = check_close(p.result, p.reference, kTol);
  EXPECT_TRUE(c.ok) << c.report;
  EXPECT_EQ(c.elements, 24);
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.max_abs_error, 0.0);
  EXPECT_EQ(c.report.rfind("ok: 24 elements", 0), 0u) << c.report;
  EXPECT_EQ(count_lines(c.report), 1);
}

TEST(HostCheckClose, ValueJustOutsideToleranceIsFlaggedAtItsIndex) {
  Pair p;
  p.reference.at(1, 2, 3) = 2.0;
  p.result.at(1, 2, 3) = static_cast<float>(2.0 + kTol.atol + kTol.rtol * 2.0 + 1e-5);
  const CheckResult c = check_close(p.result, p.reference, kTol);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_NEAR(c.max_abs_error, 2.11e-3, 1e-6);
  EXPECT_NE(c.report.find("FAILED: 1 of 24 elements mismatch"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("[1, 2, 3]: result 2.0021"), std::string::npos) << c.report;
  EXPECT_EQ(count_lines(c.report), 2);
}

TEST(HostCheckClose, ValueJustInsideTolerancePasses) {
  Pair p;
  p.reference.at(0, 1, 2) = 2.0;
  p.result.at(0, 1, 2) = static_cast<float>(2.0 + kTol.atol + kTol.rtol * 2.0 - 1e-5);
  const CheckResult c = check_close(p.result, p.reference, kTol);
  EXPECT_TRUE(c.ok) << c.report;
  EXPECT_NEAR(c.max_abs_error, 2.09e-3, 1e-6);
  EXPECT_NEAR(c.max_rel_error, 2.09e-3 / 2.0, 1e-6);
}

TEST(HostCheckClose, NanInTheResultFailsEvenWithHugeTolerance) {
  Pair p;
  p.result.at(0, 2, 1) = std::numeric_limits<float>::quiet_NaN();
  const CheckResult c = check_close(p.result, p.reference, Tolerance{1e30, 1e30});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_TRUE(std::isinf(c.max_abs_error));
  EXPECT_NE(c.report.find("[0, 2, 1]: result nan"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("result is not finite"), std::string::npos) << c.report;
}

TEST(HostCheckClose, InfinityInResultOrReferenceFails) {
  Pair p;
  p.result.at(1, 0, 0) = std::numeric_limits<float>::infinity();
  p.reference.at(0, 0, 0) = -std::numeric_limits<double>::infinity();
  const CheckResult c = check_close(p.result, p.reference, Tolerance{1e30, 1e30});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_NE(c.report.find("[0, 0, 0]"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("reference is not finite"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("[1, 0, 0]: result inf"), std::string::npos) << c.report;
}

TEST(HostCheckClose, PoisonedHalfOutputFails) {
  // What DeviceBuffer::fill_bytes(0xFF) leaves in an output element the kernel never wrote.
  Tensor<half> result({4});
  Tensor<double> reference({4});
  std::memset(result.data(), 0xff, result.storage_bytes());
  const CheckResult c = check_close(result, reference, Tolerance{1, 1});
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 4);
}

TEST(HostCheckClose, MismatchedLengthsFail) {
  const Tensor<float> result({2, 3});
  const Tensor<float> reference({3, 2});
  const CheckResult c = check_close(result, reference, kTol);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.report, "FAILED: lengths differ: result [2, 3], reference [3, 2]");
  const Tensor<float> lower_rank({6});
  EXPECT_FALSE(check_close(result, lower_rank, kTol).ok);
}

TEST(HostCheckClose, ReportsAtMostMaxReportedButCountsAll) {
  Pair p;
  for (float& x : p.result.storage()) x += 1.0f;
  const CheckResult c = check_close(p.result, p.reference, kTol, 3);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 24);
  EXPECT_EQ(count_lines(c.report), 4);
  EXPECT_NE(c.report.find("first 3 listed"), std::string::npos) << c.report;
  // Mismatches are listed in logical order.
  EXPECT_NE(c.report.find("\n  [0, 0, 0]"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("\n  [0, 0, 2]"), std::string::npos) << c.report;
  EXPECT_EQ(c.report.find("[0, 0, 3]"), std::string::npos) << c.report;
  EXPECT_EQ(count_lines(check_close(p.result, p.reference, kTol, 0).report), 1);
}

TEST(HostCheckClose, ComparesByLogicalIndexAcrossLayoutsAndTypes) {
  const Indices lengths = {2, 3, 4, 5};
  Tensor<half> nhwc(lengths, strides_for_order(lengths, {0, 2, 3, 1}));
  Tensor<double> nchw(lengths);
  fill(nhwc, InitMethod::kDecimals, 8);
  nhwc.for_each_index([&](const Indices& i) { nchw(i) = type_convert<double>(nhwc(i)); });
  EXPECT_TRUE(check_close(nhwc, nchw, Tolerance{0, 0}).ok);
  nhwc.at(1, 2, 3, 4) = half(type_convert<float>(nhwc.at(1, 2, 3, 4)) + 0.5f);
  const CheckResult c = check_close(nhwc, nchw, averaged_tolerance<half>());
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.report.find("[1, 2, 3, 4]"), std::string::npos) << c.report;
}

TEST(HostCheckClose, RelativeErrorSkipsZeroReferences) {
  Tensor<float> result({2});
  Tensor<double> reference({2});
  result.at(0) = 1e-6f;  // reference 0: only atol applies
  result.at(1) = 4.0f;
  reference.at(1) = 4.0;
  const CheckResult c = check_close(result, reference, Tolerance{0, 1e-5});
  EXPECT_TRUE(c.ok) << c.report;
  EXPECT_EQ(c.max_rel_error, 0.0);
  EXPECT_FALSE(check_close(result, reference, Tolerance{1, 1e-7}).ok);
}

TEST(HostCheckClose, EmptyTensorsPass) {
  const Tensor<float> a({0, 3});
  const Tensor<float> b({0, 3});
  const CheckResult c = check_close(a, b, kTol);
  EXPECT_TRUE(c.ok);
  EXPECT_EQ(c.elements, 0);
}

TEST(HostCheckEqual, IntegerValuedDataMatchExactly) {
  Tensor<bfloat16> result({3, 7});
  Tensor<bfloat16> reference({3, 7});
  fill(result, InitMethod::kIntegers, 4);
  fill(reference, InitMethod::kIntegers, 4);
  EXPECT_TRUE(check_equal(result, reference).ok);
  result.at(2, 6) = bfloat16(type_convert<float>(result.at(2, 6)) + 1.0f);
  const CheckResult c = check_equal(result, reference);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_NE(c.report.find("[2, 6]"), std::string::npos) << c.report;
  EXPECT_NE(c.report.find("(exact)"), std::string::npos) << c.report;
}

TEST(HostCheckEqual, SixteenBitTypesCompareBits) {
  Tensor<half> result({1});
  Tensor<half> reference({1});
  result.at(0) = half(-0.0f);
  reference.at(0) = half(0.0f);
  const CheckResult c = check_equal(result, reference);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.report.find("bits differ"), std::string::npos) << c.report;
  // Across types the values are compared: -0 == +0.
  Tensor<float> as_float({1});
  as_float.at(0) = -0.0f;
  EXPECT_TRUE(check_equal(as_float, reference).ok);
}

TEST(HostCheckEqual, IntegersAndNonFinite) {
  Tensor<int> a({3});
  Tensor<std::int64_t> b({3});
  a.at(1) = 7;
  b.at(1) = 7;
  EXPECT_TRUE(check_equal(a, b).ok);
  b.at(2) = -1;
  EXPECT_FALSE(check_equal(a, b).ok);
  Tensor<std::int64_t> big({1}), big_plus_one({1});  // equal as doubles, not as integers
  big.at(0) = (std::int64_t{1} << 60);
  big_plus_one.at(0) = (std::int64_t{1} << 60) + 1;
  EXPECT_FALSE(check_equal(big, big_plus_one).ok);
  Tensor<float> nan({1}), same_nan({1});
  nan.at(0) = same_nan.at(0) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(check_equal(nan, same_nan).ok);
}

TEST(HostTolerance, OrderedByPrecision) {
  const Tolerance f64 = averaged_tolerance<double>();
  const Tolerance f32 = averaged_tolerance<float>();
  const Tolerance f16 = averaged_tolerance<half>();
  const Tolerance b16 = averaged_tolerance<bfloat16>();
  EXPECT_NEAR(f32.rtol, 1e-5, 4e-6);
  EXPECT_NEAR(f16.rtol, 1e-3, 1e-5);
  EXPECT_NEAR(b16.rtol, 8e-3, 1e-5);
  EXPECT_LT(f64.rtol, 1e-11);
  EXPECT_LT(f64.rtol, f32.rtol);
  EXPECT_LT(f32.rtol, f16.rtol);
  EXPECT_LT(f16.rtol, b16.rtol);
  EXPECT_LT(sum_tolerance<float>(1).rtol, f16.rtol);
}

// An average's bound is the same whatever it averaged over, and scales with the terms' size only.
TEST(HostTolerance, AveragedBoundFollowsTheTermsNotTheirCount) {
  const Tolerance one = averaged_tolerance<float>(), eight = averaged_tolerance<float>(8);
  EXPECT_EQ(one.rtol, eight.rtol);
  EXPECT_DOUBLE_EQ(eight.atol, 8 * one.atol);
  EXPECT_DOUBLE_EQ(one.atol, one.rtol);
  // fp32: well below a 1e-4 error, the size of a lost 1/8 of a group's data at the 1e-3 level.
  EXPECT_LT(one.atol, 2e-5);
}

// A sum's bound grows like the square root of its length, both relative and absolute.
TEST(HostTolerance, SumBoundGrowsLikeTheSquareRootOfTheLength) {
  for (std::int64_t n : {16, 1024, 1 << 20}) {
    const Tolerance shorter = sum_tolerance<float>(n), longer = sum_tolerance<float>(4 * n);
    EXPECT_DOUBLE_EQ(longer.atol, 2 * shorter.atol) << n;
    EXPECT_LT(shorter.rtol, longer.rtol) << n;
    EXPECT_LT(longer.rtol - 1e-5, 2 * (shorter.rtol - 1e-5) + 1e-12) << n;
  }
  EXPECT_DOUBLE_EQ(sum_tolerance<half>(100, 3).atol, 3 * sum_tolerance<half>(100).atol);
  // fp32 over a 4096-term sum of terms of order 1 (the sum ~64): far below a dropped term.
  EXPECT_LT(sum_tolerance<float>(4096).rtol, 1e-4);
  EXPECT_LT(sum_tolerance<float>(4096).atol, 1e-3);
  // Non-positive lengths count as 1.
  EXPECT_EQ(sum_tolerance<float>(0).rtol, sum_tolerance<float>(1).rtol);
  EXPECT_EQ(sum_tolerance<float>(-3).atol, sum_tolerance<float>(1).atol);
}

}  // namespace
