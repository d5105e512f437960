/// @file backward_data.hpp
/// @brief GroupNorm backward data: dx only (Backward with dγ/dβ left out).
#pragma once

#include "hipgrad/ops/groupnorm/backward.hpp"

namespace hipgrad::groupnorm {

template <typename T, typename TParam = T>
class BackwardData {
  using Fused = Backward<T, TParam>;

 public:
  using Problem = BackwardProblem;

  struct Args {
    const T* dy = nullptr;
    const T* x = nullptr;
    const TParam* gamma = nullptr;
    const TParam* beta = nullptr;  ///< read only with a fused Swish
    const float* mean = nullptr;
    const float* rstd = nullptr;
    T* dx = nullptr;
  };

  static Status can_implement(const BackwardProblem& p, const Args& a) {
    if (!a.dx) return Status::invalid_argument("dx must not be null");
    return Fused::can_implement(p, fused(a));
  }
  static std::size_t workspace_size(const BackwardProblem& p) { return Fused::workspace_size(p); }
  static Status run(const BackwardProblem& p, const Args& a, void* workspace, std::size_t bytes, hipStream_t stream) {
    HIPGRAD_RETURN_IF_ERROR(can_implement(p, a));
    return Fused::run(p, fused(a), workspace, bytes, stream);
  }
  /// The path run() takes for these arguments (default: 16-byte aligned pointers).
  static std::string name(const BackwardProblem& p, const Args& a = Args{}) {
    return "groupnorm_bwd_data" + Fused::name(p, fused(a)).substr(13);  // no dx given: Fused names dx's path
  }

 private:
  static typename Fused::Args fused(const Args& a) {
    return {a.dy, a.x, a.gamma, a.beta, a.mean, a.rstd, a.dx, nullptr, nullptr};
  }
};

}  // namespace hipgrad::groupnorm
