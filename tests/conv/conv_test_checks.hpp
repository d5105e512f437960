/// @file conv_test_checks.hpp
/// @brief How the conv GPU tests judge an op's output: its gaps (storage outside the tensor's
///        elements, as padded strides leave) still hold the poison, and its elements equal the
///        reference (rounded once, on integer data) or lie within the tolerance of fp32 sums of
///        `terms` products (decimal data).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/poison.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::test {

template <typename T>
void expect_conv_output(const host::Tensor<T>& result, const host::Tensor<double>& expected, host::InitMethod init,
                        Index terms, bool tf32, const std::string& name) {
  std::vector<bool> inside(result.storage().size(), false);
  result.for_each_index(
      [&](const std::vector<Index>& i) { inside[static_cast<std::size_t>(result.offset(i))] = true; });
  const T poisoned = poison_nan<T>();
  for (std::size_t e = 0; e < inside.size(); ++e) {
    if (!inside[e] && std::memcmp(&result.storage()[e], &poisoned, sizeof(T)) != 0) {
      ADD_FAILURE() << name << ": storage element " << e << " outside the output's elements written";
      break;
    }
  }
  if (init == host::InitMethod::kIntegers) {
    host::Tensor<T> rounded(result.lengths());
    rounded.for_each_index([&](const std::vector<Index>& i) { rounded(i) = type_convert<T>(expected(i)); });
    const host::CheckResult r = host::check_equal(result, rounded);
    EXPECT_TRUE(r.ok) << name << ": " << r.report;
  } else {
    const host::CheckResult r = host::check_close(result, expected, gemm_test::decimal_tolerance<T>(terms, tf32));
    EXPECT_TRUE(r.ok) << name << ": " << r.report;
  }
}

}  // namespace hipgrad::test
