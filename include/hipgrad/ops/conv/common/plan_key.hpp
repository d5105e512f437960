/// @file plan_key.hpp
/// @brief The key of a convolution op's recent plans (core/plan_cache.hpp): every field of the
///        problem and the device, so that a hit is exactly the plan the call would make.
#pragma once

#include <cstdint>
#include <vector>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// 64 words hold a 3-D problem's 47.
using ConvPlanKey = PlanKey<64>;

template <int NDim>
ConvPlanKey conv_plan_key(const DeviceInfo& device, const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  ConvPlanKey key;
  key.add(device.device).add(p.G).add(p.N).add(p.K).add(p.C);
  for (int d = 0; d < NDim; ++d) {
    key.add(p.filter[d]).add(p.input[d]).add(p.strides[d]).add(p.dilations[d]);
    key.add(p.left_pads[d]).add(p.right_pads[d]);
  }
  for (const std::vector<Index>* strides : {&problem.input_strides, &problem.output_strides, &problem.weight_strides}) {
    key.add(static_cast<Index>(strides->size()));
    for (const Index s : *strides) key.add(s);
  }
  key.add(static_cast<Index>(problem.algorithm)).add(problem.allow_tf32 ? 1 : 0).add(problem.split_k);
  return key;
}

/// The key of one call: the problem, the current device, and each pointer's address modulo 16
/// (the paths that load 16-byte vectors or TMA boxes depend on it).
template <int NDim, typename... Pointers>
ConvPlanKey conv_call_key(const Problem<NDim>& problem, const Pointers*... pointers) {
  ConvPlanKey key = conv_plan_key(current_device_info(), problem);
  (key.add(static_cast<Index>(reinterpret_cast<std::uintptr_t>(pointers) % 16)), ...);
  return key;
}

/// What the conv ops decomposed and searched on this thread: tests count that repeated calls on
/// one problem reuse the first call's phases and boxes.
struct ConvPlanCounts {
  long long phase_decompositions = 0;  ///< backward-data's stride phases
  long long box_searches = 0;          ///< backward-data's phase boxes, backward-weight's geometry
};
inline ConvPlanCounts& conv_plan_counts() {
  thread_local ConvPlanCounts counts;
  return counts;
}

/// The key of what the stride phases depend on: per dimension the input, filter, stride,
/// dilation and left pad (two words to spare for what a caller adds).
template <int NDim>
PlanKey<5 * NDim + 4> phase_key(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  PlanKey<5 * NDim + 4> key;
  for (int d = 0; d < NDim; ++d)
    key.add(p.input[d]).add(p.filter[d]).add(p.strides[d]).add(p.dilations[d]).add(p.left_pads[d]);
  return key;
}

}  // namespace hipgrad::conv::detail
