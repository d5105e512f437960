/// @file sub_problems.hpp
/// @brief Backward-data as grouped GEMM sub-problems: one per group and stride phase with dx
///        positions (stride_phases.hpp), each a DyGather × WeightGather product stored by
///        DxScatter. Phases that meet no tap have K = 0: the launch writes their dx as zeros.
#pragma once

#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/backward_data/operands.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/plan_key.hpp"
#include "hipgrad/ops/conv/backward_data/stride_phases.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"

namespace hipgrad::conv::detail {

template <typename T, int NDim, bool kVectors>
using BackwardDataSubProblem =
    gemm::SubProblem<DyGather<T, NDim, kVectors>, WeightGather<T, NDim, kVectors>, DxScatter<T, NDim>>;

/// The phases of `problem` with dx positions, decomposed once per convolution on this thread.
template <int NDim>
std::vector<Phase<NDim>> backward_data_phases(const Problem<NDim>& problem) {
  thread_local RecentPlans<PlanKey<5 * NDim + 4>, std::vector<Phase<NDim>>> recent;
  return recent.find_or_make(phase_key(problem), [&] {
    ++conv_plan_counts().phase_decompositions;
    const ConvParams<NDim>& p = problem.params;
    return stride_phases<NDim>(p.input, p.filter, p.strides, p.dilations, p.left_pads);
  });
}

/// GEMM extents of one phase: M = N × Π count, K = Π taps × Kp (0 when a dimension has no tap).
struct PhaseExtents {
  Index m;
  Index taps;
};
template <int NDim>
PhaseExtents phase_extents(const Problem<NDim>& problem, const Phase<NDim>& phase) {
  PhaseExtents e{problem.params.N, 1};
  for (int d = 0; d < NDim; ++d) {
    e.m *= phase[d].count;
    e.taps *= phase[d].taps;
  }
  return e;
}

/// The A loader of group g, phase `phase`; `walk` holds the K split.
template <typename T, int NDim, bool kVectors>
DyGather<T, NDim, kVectors> dy_gather(const Problem<NDim>& problem, const T* dy, Index g, const Phase<NDim>& phase,
                                      const TapWalk<NDim>& walk) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.output_strides;
  const auto out = p.output_spatial();
  DyGather<T, NDim, kVectors> a{};
  a.data = dy + g * s[0];
  a.stride_n = s[1];
  a.walk = walk;
  a.walk.channel_offset = s[2];
  for (int d = 0; d < NDim; ++d) {
    a.stride_o[d] = s[3 + d];
    a.output_length[d] = static_cast<int>(out[d]);
    a.output_base[d] = static_cast<int>(phase[d].output_base);
    a.tap_dilation[d] = static_cast<int>(phase[d].tap_dilation);
    a.count[d] = FastDivmod(static_cast<std::uint32_t>(phase[d].count));
    a.walk.tap_offset[d] = -a.tap_dilation[d] * a.stride_o[d];  // each tap moves o back by the dilation
  }
  a.channels = static_cast<int>(p.K);
  a.m_extent = static_cast<int>(phase_extents<NDim>(problem, phase).m);
  return a;
}

/// The B loader of group g, phase `phase`; `walk` holds the K split.
template <typename T, int NDim, bool kVectors>
WeightGather<T, NDim, kVectors> weight_gather(const Problem<NDim>& problem, const T* w, Index g,
                                              const Phase<NDim>& phase, const TapWalk<NDim>& walk) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.weight_strides;
  WeightGather<T, NDim, kVectors> b{};
  b.data = w + g * s[0];
  b.stride_c = s[2];
  b.walk = walk;
  b.walk.channel_offset = s[1];
  for (int d = 0; d < NDim; ++d) {
    b.walk.base += phase[d].first_tap * s[3 + d];
    b.walk.tap_offset[d] = phase[d].tap_step * s[3 + d];
  }
  b.channels = static_cast<int>(p.K);
  b.c_extent = static_cast<int>(p.C);
  return b;
}

/// The epilogue of group g, phase `phase`.
template <typename T, int NDim>
DxScatter<T, NDim> dx_scatter(const Problem<NDim>& problem, T* dx, Index g, const Phase<NDim>& phase) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.input_strides;
  DxScatter<T, NDim> e{};
  Index first = g * s[0];
  for (int d = 0; d < NDim; ++d) {
    first += phase[d].first * s[3 + d];
    e.stride_i[d] = s[3 + d] * p.strides[d];
    e.count[d] = FastDivmod(static_cast<std::uint32_t>(phase[d].count));
  }
  e.out = dx + first;
  e.stride_n = s[1];
  e.stride_c = s[2];
  e.m_size = static_cast<int>(phase_extents<NDim>(problem, phase).m);
  e.n_size = static_cast<int>(p.C);
  e.partials = nullptr;
  return e;
}

/// Every sub-problem of the launch: groups outermost, then phases.
template <typename T, int NDim, bool kVectors>
std::vector<BackwardDataSubProblem<T, NDim, kVectors>> backward_data_sub_problems(const Problem<NDim>& problem,
                                                                                  const T* dy, const T* w, T* dx) {
  const std::vector<Phase<NDim>> phases = backward_data_phases(problem);
  const Index kp = padded_channels<T, kVectors>(problem.params.K);
  std::vector<BackwardDataSubProblem<T, NDim, kVectors>> problems;
  problems.reserve(static_cast<std::size_t>(problem.params.G) * phases.size());
  for (Index g = 0; g < problem.params.G; ++g) {
    for (const Phase<NDim>& phase : phases) {
      TapWalk<NDim> walk{};
      for (int d = 0; d < NDim; ++d) walk.taps[d] = FastDivmod(static_cast<std::uint32_t>(phase[d].taps));
      walk.padded_channels = FastDivmod(static_cast<std::uint32_t>(kp));
      walk.k_extent = static_cast<int>(phase_extents<NDim>(problem, phase).taps * kp);
      problems.push_back({dy_gather<T, NDim, kVectors>(problem, dy, g, phase, walk),
                          weight_gather<T, NDim, kVectors>(problem, w, g, phase, walk),
                          dx_scatter<T, NDim>(problem, dx, g, phase)});
    }
  }
  return problems;
}

}  // namespace hipgrad::conv::detail
