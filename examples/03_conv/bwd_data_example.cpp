/// @file bwd_data_example.cpp
/// @brief dx = dy ⋆ rot180(w) with conv::BackwardData: the tensors' lengths and strides, the
///        op's name, the check against the CPU reference and `Perf: ms, TFlops, GB/s`.

#include "bwd_data_example.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include "conv_example.hpp"
#include "hipgrad/host/reference/conv.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/backward_data.hpp"

namespace conv_example {
namespace {

template <typename T, int NDim>
int run_typed(const Config& c, const char* program) {
  using Op = hc::BackwardData<T, NDim>;
  const hc::Problem<NDim> problem = make_problem<NDim>(c);
  const hc::ConvParams<NDim>& p = problem.params;
  const Status valid = problem.validate();
  if (!valid.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", program, valid.to_string().c_str());
    return 2;
  }
  hh::Tensor<T> dy(p.output_lengths(), problem.output_strides), w(p.weight_lengths(), problem.weight_strides);
  hh::Tensor<T> dx(p.input_lengths(), problem.input_strides);
  hh::fill(dy, c.args.init, 1);
  hh::fill(w, c.args.init, 2);
  std::memset(dx.data(), 0xff, dx.storage_bytes());  // NaN: the op must write every element
  std::printf("%s %s, init %s\n", p.to_string().c_str(), c.dtype.c_str(), hh::init_method_name(c.args.init));
  std::printf("dy %s\nw  %s\ndx %s\n", describe(p.output_lengths(), problem.output_strides).c_str(),
              describe(p.weight_lengths(), problem.weight_strides).c_str(),
              describe(p.input_lengths(), problem.input_strides).c_str());

  const int copies = c.args.time ? hh::l2_rotation_copies(dy.storage_bytes() + w.storage_bytes()) : 1;
  hh::DeviceBuffer<T> ddy, dw, ddx;
  hh::DeviceBuffer<unsigned char> workspace;
  Status s = upload_copies(dy, copies, &ddy);
  if (s.is_ok()) s = upload_copies(w, copies, &dw);
  if (s.is_ok()) s = upload_copies(dx, 1, &ddx);
  if (s.is_ok()) s = workspace.allocate(Op::workspace_size(problem));
  auto args = [&](int i) {
    const std::size_t copy = static_cast<std::size_t>(i % copies);
    return
        typename Op::Args{ddy.data() + copy * dy.storage().size(), dw.data() + copy * w.storage().size(), ddx.data()};
  };
  if (s.is_ok()) s = Op::can_implement(problem, args(0));
  if (s.is_ok()) std::printf("%s on %s\n", Op::name(problem, args(0)).c_str(), hh::device_description().c_str());
  if (s.is_ok()) s = Op::run(problem, args(0), workspace.data(), workspace.bytes(), nullptr);
  if (s.is_ok()) s = ddx.copy_to(dx);  // synchronous: also reports the kernel's errors
  float ms = 0;
  if (s.is_ok() && c.args.time) {
    hh::TimingOptions timing;
    timing.repeats = c.repeats;
    s = hh::time_median_ms(
        [&](int i) { return Op::run(problem, args(i), workspace.data(), workspace.bytes(), nullptr); }, timing, &ms);
  }
  if (!s.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", program, s.to_string().c_str());
    return 1;
  }
  hh::CheckResult r;
  if (c.args.verify) {
    hh::Tensor<double> expected(p.input_lengths());
    const Status ref = hh::reference::conv_backward_data(dy, w, expected, p);
    if (!ref.is_ok()) {
      std::fprintf(stderr, "%s: reference: %s\n", program, ref.to_string().c_str());
      return 1;
    }
    Index terms = p.K;
    for (int d = 0; d < NDim; ++d) terms *= p.filter[d];
    r = hh::check_close(dx, expected, sum_tolerance<T>(terms, c.args.init == hh::InitMethod::kIntegers, c.tf32));
  }
  const double bytes =
      static_cast<double>(sizeof(T)) * static_cast<double>(dy.num_elements() + w.num_elements() + dx.num_elements());
  return finish(c.args.verify, r, c.args.time, ms, static_cast<double>(p.flops()), bytes);
}

template <int NDim>
int run_rank(const Config& c, const char* program) {
  if (c.dtype == "fp32") return run_typed<float, NDim>(c, program);
  if (c.dtype == "bf16") return run_typed<hipgrad::bfloat16, NDim>(c, program);
  return run_typed<hipgrad::half, NDim>(c, program);
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
  if (!hh::require_gpu(program)) return 1;
  if (c.ndim == 1) return run_rank<1>(c, program);
  if (c.ndim == 3) return run_rank<3>(c, program);
  return run_rank<2>(c, program);
}

}  // namespace conv_example
