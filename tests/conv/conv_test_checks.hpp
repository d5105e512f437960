/// @file conv_test_checks.hpp
/// @brief How the conv GPU tests judge an op's output: its gaps (storage outside the tensor's
///        elements, as padded strides leave) still hold the poison, and its elements equal the
///        reference (rounded once, on integer data) or lie within the tolerance of fp32 sums of
///        `terms` products (decimal data); and which paths a test runs a problem on.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/poison.hpp"
#include "gemm/gemm_test_kinds.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/problem.hpp"

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

/// The paths to try on `problem` with conv op Op: kAuto, and every forced one that can run it
/// here.
template <typename Op, int NDim>
std::vector<conv::Algorithm> runnable_algorithms(conv::Problem<NDim> problem) {
  using Element = std::remove_const_t<std::remove_pointer_t<decltype(Op::Args::dy)>>;  // both ops read dy
  std::vector<conv::Algorithm> algorithms = {conv::Algorithm::kAuto};
  // Aligned, disjoint fake pointers: can_implement never dereferences them.
  const typename Op::Args fake{reinterpret_cast<const Element*>(Index{1} << 40),
                               reinterpret_cast<const Element*>(Index{2} << 40),
                               reinterpret_cast<Element*>(Index{3} << 40)};
  for (conv::Algorithm a :
       {conv::Algorithm::kSimt, conv::Algorithm::kMatrix, conv::Algorithm::kGather, conv::Algorithm::kTmaBoxes,
        conv::Algorithm::kDirect, conv::Algorithm::kUnfold, conv::Algorithm::kStaged}) {
    problem.algorithm = a;
    if (Op::can_implement(problem, fake).is_ok()) algorithms.push_back(a);
  }
  return algorithms;
}

/// check(problem, init, seed) on every path runnable_algorithms gives, integer and decimal data,
/// until the first failure.
template <typename Op, int NDim, typename Check>
void check_every_path(conv::Problem<NDim> problem, std::uint64_t seed, Check check) {
  for (conv::Algorithm a : runnable_algorithms<Op, NDim>(problem)) {
    problem.algorithm = a;
    for (host::InitMethod init : {host::InitMethod::kIntegers, host::InitMethod::kDecimals}) {
      check(problem, init, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

/// `problem` with the test kind K's TF32 choice.
template <typename K, int NDim>
conv::Problem<NDim> with_kind(conv::Problem<NDim> problem) {
  problem.allow_tf32 = K::kAllowTf32;
  return problem;
}

}  // namespace hipgrad::test
