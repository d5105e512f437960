/// @file conv_test_runs.hpp
/// @brief The conv GPU tests' runs of one problem: dx of BackwardData and dw of BackwardWeight
///        from filled inputs on the GPU (outputs NaN-poisoned first, the workspace filled with
///        0xff), compared with the CPU reference (conv_test_checks.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/poison.hpp"
#include "conv/conv_test_checks.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"

namespace hipgrad::test {

using conv::ConvParams;
using conv::Problem;
using host::DeviceBuffer;
using host::InitMethod;
using host::Tensor;

/// Which code a check runs: the op (nullopt), or the direct plan made with these kernels (which
/// must take the vector kernels where their lane layout applies).
using DirectKernels = std::optional<conv::direct::Kernels>;

template <int NDim>
bool wants_vectors(const DirectKernels& direct, const ConvParams<NDim>& p, const std::vector<Index>& a,
                   const std::vector<Index>& b) {
  return direct && conv::direct::vector_lane_layout(p, a, b, *direct) != conv::direct::LaneLayout::kNone;
}

/// Runs `problem` on the GPU (the op, or the direct plan of `direct`) and compares dx with the
/// reference; returns the name of what ran.
template <typename T, int NDim>
std::string check_backward_data(const Problem<NDim>& problem, InitMethod init, std::uint64_t seed,
                                DirectKernels direct = std::nullopt) {
  using Op = hipgrad::conv::BackwardData<T, NDim>;
  const ConvParams<NDim>& p = problem.params;
  SCOPED_TRACE(problem.to_string() + " " + host::init_method_name(init));
  Tensor<T> dy(p.output_lengths(), problem.output_strides), w(p.weight_lengths(), problem.weight_strides);
  Tensor<T> dx(p.input_lengths(), problem.input_strides);
  host::fill(dy, init, seed);
  host::fill(w, init, seed + 1);
  for (T& v : dx.storage()) v = poison_nan<T>();
  Tensor<double> expected(p.input_lengths());
  const Status reference = host::reference::conv_backward_data(dy, w, expected, p);
  EXPECT_TRUE(reference.is_ok()) << reference.to_string();

  DeviceBuffer<T> ddy, dw, ddx;
  DeviceBuffer<unsigned char> workspace;
  EXPECT_TRUE(ddy.allocate(dy.storage().size()).is_ok() && ddy.copy_from(dy).is_ok());
  EXPECT_TRUE(dw.allocate(w.storage().size()).is_ok() && dw.copy_from(w).is_ok());
  EXPECT_TRUE(ddx.allocate(dx.storage().size()).is_ok() && ddx.copy_from(dx).is_ok());
  EXPECT_TRUE(workspace.allocate(Op::workspace_size(problem)).is_ok());
  EXPECT_TRUE(workspace.fill_bytes(0xff).is_ok());
  const typename Op::Args args{ddy.data(), dw.data(), ddx.data()};
  std::string name = Op::name(problem, args);
  Status s;
  if (direct) {
    const auto plan = conv::direct::make_data_plan<T, NDim>(problem, *direct);
    EXPECT_TRUE(plan.status.is_ok()) << plan.status.to_string();
    EXPECT_TRUE(plan.vectors || !wants_vectors(direct, p, problem.output_strides, problem.input_strides))
        << plan.vector.status.to_string();
    name = conv::direct::data_plan_name(plan);
    s = conv::direct::launch_backward_data(plan, ddy.data(), dw.data(), ddx.data(), nullptr);
  } else {
    s = Op::run(problem, args, workspace.data(), workspace.bytes(), nullptr);
  }
  EXPECT_TRUE(s.is_ok()) << name << ": " << s.to_string();
  EXPECT_EQ(hipDeviceSynchronize(), hipSuccess);
  Tensor<T> result(p.input_lengths(), problem.input_strides);
  EXPECT_TRUE(ddx.copy_to(result).is_ok());

  Index terms = p.K;
  for (int d = 0; d < NDim; ++d) terms *= p.filter[d];
  expect_conv_output(result, expected, init, terms, problem.allow_tf32, name);
  return name;
}

/// dw of `problem` from x and dy on the GPU (dw poisoned first), as stored; from the op, or the
/// direct plan of `direct`.
template <typename T, int NDim>
Tensor<T> run_backward_weight(const Problem<NDim>& problem, const Tensor<T>& x, const Tensor<T>& dy, std::string* name,
                              DirectKernels direct = std::nullopt) {
  using Op = hipgrad::conv::BackwardWeight<T, NDim>;
  const ConvParams<NDim>& p = problem.params;
  Tensor<T> dw(p.weight_lengths(), problem.weight_strides);
  for (T& v : dw.storage()) v = poison_nan<T>();
  DeviceBuffer<T> dx_, ddy, ddw;
  DeviceBuffer<unsigned char> workspace;
  EXPECT_TRUE(dx_.allocate(x.storage().size()).is_ok() && dx_.copy_from(x).is_ok());
  EXPECT_TRUE(ddy.allocate(dy.storage().size()).is_ok() && ddy.copy_from(dy).is_ok());
  EXPECT_TRUE(ddw.allocate(dw.storage().size()).is_ok() && ddw.copy_from(dw).is_ok());
  const auto plan = direct ? conv::direct::make_weight_plan<T, NDim>(problem, current_device_info(), *direct)
                           : conv::direct::WeightPlan<T, NDim>{};
  EXPECT_TRUE(!direct || plan.status.is_ok()) << plan.status.to_string();
  EXPECT_TRUE(plan.vectors || !wants_vectors(direct, p, problem.input_strides, problem.output_strides))
      << plan.vector.status.to_string();
  EXPECT_TRUE(workspace.allocate(direct ? plan.workspace : Op::workspace_size(problem)).is_ok());
  EXPECT_TRUE(workspace.fill_bytes(0xff).is_ok());
  const typename Op::Args args{dx_.data(), ddy.data(), ddw.data()};
  *name = direct ? conv::direct::weight_plan_name(plan) : Op::name(problem, args);
  const Status s = direct ? conv::direct::launch_backward_weight(plan, dx_.data(), ddy.data(), ddw.data(),
                                                                 reinterpret_cast<float*>(workspace.data()), nullptr)
                          : Op::run(problem, args, workspace.data(), workspace.bytes(), nullptr);
  EXPECT_TRUE(s.is_ok()) << *name << ": " << s.to_string();
  EXPECT_EQ(hipDeviceSynchronize(), hipSuccess);
  EXPECT_TRUE(ddw.copy_to(dw).is_ok());
  return dw;
}

/// Runs `problem` on the GPU and compares dw with the reference (`direct`: as run_backward_weight).
template <typename T, int NDim>
void check_backward_weight(const Problem<NDim>& problem, InitMethod init, std::uint64_t seed,
                           DirectKernels direct = std::nullopt) {
  const ConvParams<NDim>& p = problem.params;
  SCOPED_TRACE(problem.to_string() + " " + host::init_method_name(init));
  Tensor<T> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  host::fill(x, init, seed);
  host::fill(dy, init, seed + 1);
  Tensor<double> expected(p.weight_lengths());
  const Status reference = host::reference::conv_backward_weight(x, dy, expected, p);
  ASSERT_TRUE(reference.is_ok()) << reference.to_string();
  std::string name;
  const Tensor<T> result = run_backward_weight<T, NDim>(problem, x, dy, &name, direct);

  Index terms = p.N;
  for (Index o : p.output_spatial()) terms *= o;
  expect_conv_output(result, expected, init, terms, problem.allow_tf32, name);
}

/// Both ops under kAuto on `problem`, integer and decimal data, each against the reference; both
/// names must contain `route` (the route kAuto is expected to take).
template <typename T, int NDim>
void check_auto_route(const Problem<NDim>& problem, std::uint64_t seed, const std::string& route) {
  for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
    const std::string data = check_backward_data<T, NDim>(problem, init, seed++);
    EXPECT_NE(data.find(route), std::string::npos) << data;
    check_backward_weight<T, NDim>(problem, init, seed++);
    const std::string weight = conv::BackwardWeight<T, NDim>::name(problem);
    EXPECT_NE(weight.find(route), std::string::npos) << weight;
  }
}

/// Op::Args of three far-apart, 16-byte-aligned pointers (inputs, then the output), never
/// dereferenced: for the host-side checks and plans of an op.
template <typename Args, typename T>
Args far_apart_args() {
  return Args{reinterpret_cast<const T*>(Index{1} << 40), reinterpret_cast<const T*>(Index{2} << 40),
              reinterpret_cast<T*>(Index{3} << 40)};
}

/// What five rounds of `calls()` decompose and search (detail::conv_plan_counts on this thread).
template <typename Calls>
conv::detail::ConvPlanCounts plan_counts_over_five_rounds(Calls&& calls) {
  const conv::detail::ConvPlanCounts before = conv::detail::conv_plan_counts();
  for (int round = 0; round < 5; ++round) calls();
  const conv::detail::ConvPlanCounts& after = conv::detail::conv_plan_counts();
  return {after.phase_decompositions - before.phase_decompositions, after.box_searches - before.box_searches};
}

}  // namespace hipgrad::test
