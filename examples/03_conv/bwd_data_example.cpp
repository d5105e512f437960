/// @file bwd_data_example.cpp
/// @brief dx = dy ⋆ rot180(w) with conv::BackwardData: the tensors' lengths and strides, the
///        op's name, the check against the CPU reference and `Perf: ms, TFlops, GB/s`.

#include "bwd_data_example.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "conv_example.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"

namespace conv_example {
namespace {

/// dy and w in, dx out.
template <typename T, int NDim>
struct DataGradient {
  using Op = hc::BackwardData<T, NDim>;
  static constexpr const char* kNames[3] = {"dy", "w", "dx"};
  static std::vector<Index> lengths(const hc::Problem<NDim>& pr, int i) {
    return i == 0 ? pr.params.output_lengths() : i == 1 ? pr.params.weight_lengths() : pr.params.input_lengths();
  }
  static const std::vector<Index>& strides(const hc::Problem<NDim>& pr, int i) {
    return i == 0 ? pr.output_strides : i == 1 ? pr.weight_strides : pr.input_strides;
  }
  static typename Op::Args args(const T* dy, const T* w, T* dx) { return {dy, w, dx}; }
  static Status reference(const hh::Tensor<T>& dy, const hh::Tensor<T>& w, hh::Tensor<double>& dx,
                          const hc::ConvParams<NDim>& p) {
    return hh::reference::conv_backward_data(dy, w, dx, p);
  }
  static Index terms(const hc::ConvParams<NDim>& p) {
    Index terms = p.K;
    for (int d = 0; d < NDim; ++d) terms *= p.filter[d];
    return terms;
  }
};

template <int NDim>
int run_rank(const Config& c, const char* program) {
  if (c.dtype == "fp32") return run_gradient<DataGradient<float, NDim>, float, NDim>(c, program);
  if (c.dtype == "bf16")
    return run_gradient<DataGradient<hipgrad::bfloat16, NDim>, hipgrad::bfloat16, NDim>(c, program);
  return run_gradient<DataGradient<hipgrad::half, NDim>, hipgrad::half, NDim>(c, program);
}

}  // namespace

int run_backward_data_example(int argc, char** argv, bool grouped, const char* program) {
  Config c;
  const char* sizes_help = grouped ? "NDim G N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx [Dz] Dy Dx [LeftPz] LeftPy LeftPx "
                                     "[RightPz] RightPy RightPx (default 2 1 128 256 128 3 3 71 71 2 2 1 1 1 1 1 1)"
                                   : "NDim N K C [Z] Y X [Di] Hi Wi [Sz] Sy Sx [Dz] Dy Dx [LeftPz] LeftPy LeftPx "
                                     "[RightPz] RightPy RightPx (default 2 128 256 128 3 3 71 71 2 2 1 1 1 1 1 1)";
  Status s = hh::parse_example_args(argc, argv, &c.args);
  if (s.is_ok() && c.args.help) {
    std::printf("%s%s", hh::example_usage(program, sizes_help).c_str(), kOptionsHelp);
    return 0;
  }
  if (s.is_ok()) s = parse_config(&c, grouped);
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n%s%s", program, s.to_string().c_str(), hh::example_usage(program, sizes_help).c_str(),
                 kOptionsHelp);
    return 2;
  }
  if (c.args.dry_run()) return print_dry_run(c, program);
  if (!hh::require_gpu(program)) return 1;
  if (c.ndim == 1) return run_rank<1>(c, program);
  if (c.ndim == 3) return run_rank<3>(c, program);
  return run_rank<2>(c, program);
}

}  // namespace conv_example
