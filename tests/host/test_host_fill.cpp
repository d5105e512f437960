/// @file test_host_fill.cpp
/// @brief host::fill: reproducible per seed, different across seeds, in range, integral where
///        asked, layout-independent, and the same values on every platform.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/tensor.hpp"

namespace {

using hipgrad::bfloat16;
using hipgrad::half;
using hipgrad::type_convert;
using hipgrad::host::fill;
using hipgrad::host::fill_integers;
using hipgrad::host::fill_uniform;
using hipgrad::host::Index;
using hipgrad::host::InitMethod;
using hipgrad::host::strides_for_order;
using hipgrad::host::Tensor;
using Indices = std::vector<Index>;

/// The logical values, in for_each_index order, as doubles.
template <typename T>
std::vector<double> logical_values(const Tensor<T>& t) {
  std::vector<double> values;
  t.for_each_index([&](const Indices& i) { values.push_back(type_convert<double>(t(i))); });
  return values;
}

template <typename T>
bool same_bytes(const Tensor<T>& a, const Tensor<T>& b) {
  return a.storage().size() == b.storage().size() && std::memcmp(a.data(), b.data(), a.storage_bytes()) == 0;
}

template <typename T>
class HostFillTyped : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, half, bfloat16, double>;
TYPED_TEST_SUITE(HostFillTyped, StorageTypes);

TYPED_TEST(HostFillTyped, EqualSeedsGiveEqualData) {
  for (InitMethod method : {InitMethod::kIntegers, InitMethod::kDecimals}) {
    Tensor<TypeParam> a({3, 5, 7}), b({3, 5, 7});
    fill(a, method, 1234);
    fill(b, method, 1234);
    EXPECT_TRUE(same_bytes(a, b)) << hipgrad::host::init_method_name(method);
  }
}

TYPED_TEST(HostFillTyped, DifferentSeedsGiveDifferentData) {
  for (InitMethod method : {InitMethod::kIntegers, InitMethod::kDecimals}) {
    Tensor<TypeParam> a({1000}), b({1000});
    fill(a, method, 1);
    fill(b, method, 2);
    const std::vector<double> va = logical_values(a), vb = logical_values(b);
    int equal = 0;
    for (std::size_t i = 0; i < va.size(); ++i) equal += va[i] == vb[i];
    // Independent integers in [-5, 5] agree with probability 1/11 (about 91 of 1000).
    EXPECT_LT(equal, method == InitMethod::kIntegers ? 150 : 50) << hipgrad::host::init_method_name(method);
  }
}

TYPED_TEST(HostFillTyped, IntegersAreIntegralInRangeAndCoverIt) {
  Tensor<TypeParam> t({11000});
  fill(t, InitMethod::kIntegers, 7);
  std::vector<int> counts(11, 0);
  for (double v : logical_values(t)) {
    ASSERT_EQ(v, std::floor(v)) << "not an integer";
    ASSERT_GE(v, -5.0);
    ASSERT_LE(v, 5.0);
    ++counts[static_cast<std::size_t>(v + 5)];
  }
  for (int value = -5; value <= 5; ++value) {
    // 1000 expected each; a fair generator stays well within ±20%.
    EXPECT_GT(counts[static_cast<std::size_t>(value + 5)], 800) << "value " << value;
    EXPECT_LT(counts[static_cast<std::size_t>(value + 5)], 1200) << "value " << value;
  }
}

TYPED_TEST(HostFillTyped, DecimalsStayInTheHalfOpenRangeAfterRounding) {
  // bf16 keeps 8 significant bits: about one draw in 500 would round up to 1.0 without the redraw.
  Tensor<TypeParam> t({20000});
  fill(t, InitMethod::kDecimals, 99);
  std::vector<int> bins(10, 0);
  int non_integral = 0;
  for (double v : logical_values(t)) {
    ASSERT_GE(v, -1.0);
    ASSERT_LT(v, 1.0);
    non_integral += v != std::floor(v);
    ++bins[static_cast<std::size_t>((v + 1.0) * 5.0)];
  }
  EXPECT_GT(non_integral, 19000);
  for (int b = 0; b < 10; ++b) {
    EXPECT_GT(bins[static_cast<std::size_t>(b)], 1600) << "bin " << b;  // 2000 expected
    EXPECT_LT(bins[static_cast<std::size_t>(b)], 2400) << "bin " << b;
  }
}

TYPED_TEST(HostFillTyped, LogicalDataDoNotDependOnStrides) {
  const Indices lengths = {2, 6, 3, 5};  // N, C, H, W
  Tensor<TypeParam> nchw(lengths);
  Tensor<TypeParam> nhwc(lengths, strides_for_order(lengths, {0, 2, 3, 1}));
  Tensor<TypeParam> padded(lengths, {200, 1, 40, 8});  // NHWC, C padded to 8
  for (InitMethod method : {InitMethod::kIntegers, InitMethod::kDecimals}) {
    fill(nchw, method, 42);
    fill(nhwc, method, 42);
    fill(padded, method, 42);
    EXPECT_FALSE(same_bytes(nchw, nhwc)) << "the layouts should differ in memory";
    EXPECT_EQ(logical_values(nchw), logical_values(nhwc));
    EXPECT_EQ(logical_values(nchw), logical_values(padded));
  }
}

TEST(HostFill, NoneLeavesStorageAlone) {
  Tensor<float> t({4, 4});
  for (float& x : t.storage()) x = 123.0f;
  fill(t, InitMethod::kNone, 5);
  for (float x : t.storage()) EXPECT_EQ(x, 123.0f);
}

TEST(HostFill, GapsBetweenStridedElementsAreNotWritten) {
  Tensor<float> t({3, 4}, {10, 1});  // rows padded from 4 to 10
  for (float& x : t.storage()) x = 123.0f;
  fill(t, InitMethod::kDecimals, 5);
  for (std::size_t offset = 0; offset < t.storage().size(); ++offset) {
    const bool element = offset % 10 < 4;
    if (element)
      EXPECT_NE(t.storage()[offset], 123.0f) << offset;
    else
      EXPECT_EQ(t.storage()[offset], 123.0f) << offset;
  }
}

TEST(HostFill, CustomIntegerRanges) {
  Tensor<double> t({5000});
  fill_integers(t, 100, 103, 3);
  std::vector<int> counts(4, 0);
  for (double v : logical_values(t)) {
    ASSERT_TRUE(v == 100 || v == 101 || v == 102 || v == 103) << v;
    ++counts[static_cast<std::size_t>(v - 100)];
  }
  for (int c : counts) EXPECT_GT(c, 1000);

  Tensor<double> swapped({5000});
  fill_integers(swapped, 103, 100, 3);  // bounds in either order
  EXPECT_EQ(logical_values(t), logical_values(swapped));

  fill_integers(t, -7, -7, 3);
  for (double v : logical_values(t)) ASSERT_EQ(v, -7);

  Tensor<std::int64_t> wide({1000});  // the whole int64 range must not overflow the span
  fill_integers(wide, INT64_MIN, INT64_MAX, 3);
  EXPECT_NE(wide.storage()[0], wide.storage()[1]);
}

TEST(HostFill, CustomUniformRange) {
  Tensor<float> t({5000});
  fill_uniform(t, 2.0, 3.0, 11);
  double sum = 0;
  for (double v : logical_values(t)) {
    ASSERT_GE(v, 2.0);
    ASSERT_LT(v, 3.0);
    sum += v;
  }
  EXPECT_NEAR(sum / 5000, 2.5, 0.02);

  fill_uniform(t, 0.25, 0.25, 11);  // an empty interval gives its bound
  for (double v : logical_values(t)) ASSERT_EQ(v, 0.25);
}

TEST(HostFill, EmptyTensorIsFine) {
  Tensor<half> t({3, 0});
  fill(t, InitMethod::kDecimals, 1);
  EXPECT_TRUE(t.storage().empty());
}

// The generator is pure 64-bit integer arithmetic, so these values must come out on every
// compiler and standard library; a change here changes every example's data.
TEST(HostFill, KnownValuesForAFixedSeed) {
  Tensor<float> integers({8});
  fill(integers, InitMethod::kIntegers, 2024);
  EXPECT_EQ(logical_values(integers), (std::vector<double>{2, -1, 3, 2, -5, -4, 0, 1}));
  Tensor<double> decimals({3});
  fill(decimals, InitMethod::kDecimals, 2024);
  const std::vector<double> expected = {-0.58707563964234444, 0.63607253918729545, -0.089668805819257402};
  const std::vector<double> got = logical_values(decimals);
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_DOUBLE_EQ(got[i], expected[i]) << i;
}

}  // namespace
