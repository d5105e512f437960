/// @file bwd_weight_example.cpp
/// @brief dw = x ⋆ dy with conv::BackwardWeight: the tensors' lengths and strides, the op's name
///        (its path and splits), the check against the CPU reference and `Perf: ms, TFlops, GB/s`.

#include "bwd_weight_example.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "conv_example.hpp"
#include "conv_instances.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "hipgrad/ops/conv/backward_weight.hpp"

namespace conv_example {
namespace {

/// x and dy in, dw out.
template <typename T, int NDim>
struct WeightGradient {
  using Op = hc::BackwardWeight<T, NDim>;
  static constexpr const char* kNames[3] = {"x", "dy", "dw"};
  static std::vector<Index> lengths(const hc::Problem<NDim>& pr, int i) {
    return i == 0 ? pr.params.input_lengths() : i == 1 ? pr.params.output_lengths() : pr.params.weight_lengths();
  }
  static const std::vector<Index>& strides(const hc::Problem<NDim>& pr, int i) {
    return i == 0 ? pr.input_strides : i == 1 ? pr.output_strides : pr.weight_strides;
  }
  static typename Op::Args args(const T* x, const T* dy, T* dw) { return {x, dy, dw}; }
  static Status reference(const hh::Tensor<T>& x, const hh::Tensor<T>& dy, hh::Tensor<double>& dw,
                          const hc::ConvParams<NDim>& p) {
    return hh::reference::conv_backward_weight(x, dy, dw, p);
  }
  static Index terms(const hc::ConvParams<NDim>& p) {
    Index terms = p.N;
    for (Index o : p.output_spatial()) terms *= o;
    return terms;
  }
};

template <int NDim>
int run_rank(const Config& c, const char* program) {
  if (c.dtype == "fp32") return run_gradient<WeightGradient<float, NDim>, float, NDim>(c, program);
  if (c.dtype == "bf16")
    return run_gradient<WeightGradient<hipgrad::bfloat16, NDim>, hipgrad::bfloat16, NDim>(c, program);
  return run_gradient<WeightGradient<hipgrad::half, NDim>, hipgrad::half, NDim>(c, program);
}

}  // namespace

int run_backward_weight_example(int argc, char** argv, const char* program) {
  Config c;
  const char* sizes_help =
      "NDim G N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx [Dz] Dy Dx [LeftPz] LeftPy LeftPx "
      "[RightPz] RightPy RightPx (default 3 4 1 128 256 3 3 3 14 14 14 1 1 1 1 1 1 1 1 1 1 1 1)";
  Status s = hh::parse_example_args(argc, argv, &c.args);
  if (s.is_ok() && c.args.help) {
    std::printf("%s%s", hh::example_usage(program, sizes_help).c_str(), kWeightOptionsHelp);
    return 0;
  }
  if (s.is_ok()) s = parse_config(&c, true, true);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n%s%s", program, s.to_string().c_str(), hh::example_usage(program, sizes_help).c_str(),
                 kWeightOptionsHelp);
    return 2;
  }
  if (c.args.dry_run()) return print_dry_run(c, program);
  if (!hh::require_gpu(program)) return 1;
  if (c.ndim == 1) return run_rank<1>(c, program);
  if (c.ndim == 2) return run_rank<2>(c, program);
  return run_rank<3>(c, program);
}

}  // namespace conv_example
