/// @file direct_path.hpp
/// @brief What both conv ops do with the direct kernels: keep their plan of a problem (made once
///        per problem and device on the calling thread) and choose them for a call.
#pragma once

#include <utility>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/plan_key.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// An op's direct path for data of T: `MakePlan{}(problem, device)` makes its plan (its type Plan).
template <typename T, int NDim, typename MakePlan>
struct DirectPath {
  using Plan = decltype(MakePlan{}(std::declval<const Problem<NDim>&>(), std::declval<const DeviceInfo&>()));

  /// The plan of `problem` on the current device, made once per problem and device on this thread.
  static Plan plan(const Problem<NDim>& problem) {
    thread_local RecentPlans<ConvPlanKey, Plan> recent;
    const DeviceInfo& device = current_device_info();
    return recent.find_or_make(conv_plan_key(device, problem), [&] { return MakePlan{}(problem, device); });
  }

  /// *direct where the call takes the direct kernels: forced, or kAuto's choice
  /// (direct::auto_takes_direct) where they run; not ok where forced and they cannot. Where they
  /// run, *taken (if given) receives the plan, so that a call looks it up once.
  static Status choose(const Problem<NDim>& problem, bool channels_contiguous, bool* direct, Plan* taken = nullptr) {
    const auto plan_status = [&] {
      const Plan made = plan(problem);
      if (taken != nullptr) *taken = made;
      return made.status;
    };
    return choose_direct_path<T>(problem, channels_contiguous, plan_status, direct);
  }

  /// Whether a valid problem takes the direct kernels.
  static bool takes(const Problem<NDim>& problem, bool channels_contiguous) {
    bool direct = false;
    return choose(problem, channels_contiguous, &direct).is_ok() && direct;
  }
};

}  // namespace hipgrad::conv::detail
