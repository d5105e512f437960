/// @file conv_example.hpp
/// @brief What the convolution examples share: the seed's command line (NDim [G] N K C, then per
///        spatial dimension the filter, input, strides, dilations, left and right pads), the
///        options, tensors in a layout, a run on the device, the CPU check and the timing line.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/cli.hpp"
#include "hipgrad/host/device_buffer.hpp"
#include "hipgrad/host/fill.hpp"
#include "hipgrad/host/gpu_detect.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/host/timer.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace conv_example {

using hipgrad::Index;
using hipgrad::Status;
namespace hc = hipgrad::conv;
namespace hh = hipgrad::host;

constexpr const char* kOptionsHelp =
    "options:\n"
    "  --dtype=fp16|bf16|fp32        dy, w and dx (default fp16)\n"
    "  --tf32=0|1                    fp32 only: allow TF32 matrix units (default 0: exact fp32)\n"
    "  --layout=nhwgc|gnhwc|ngchw    activations' layout (weights GKYXC, or GKCYX with ngchw); default nhwgc\n"
    "  --algorithm=auto              auto, gather, matrix, simt, tma_boxes, direct, unfold or staged (a\n"
    "                                forced one that cannot run is an error)\n"
    "  --repeats=20                  timed runs (default: the time argument if > 1, else 20)\n";
constexpr const char* kWeightOptionsHelp =
    "options:\n"
    "  --dtype=fp16|bf16|fp32        x, dy and dw (default fp16)\n"
    "  --tf32=0|1                    fp32 only: allow TF32 matrix units (default 0: exact fp32)\n"
    "  --layout=nhwgc|gnhwc|ngchw    activations' layout (weights GKYXC, or GKCYX with ngchw); default nhwgc\n"
    "  --split-k=auto                splits of the reduction over N and the output positions: a count, or auto\n"
    "  --algorithm=auto              auto, gather, matrix, simt, tma_boxes, direct, unfold or staged (a\n"
    "                                forced one that cannot run is an error)\n"
    "  --repeats=20                  timed runs (default: the time argument if > 1, else 20)\n";

/// The command line's convolution, dtype and options; `grouped`: the sizes start NDim G N K C.
struct Config {
  hh::ExampleArgs args;
  int ndim = 2;
  std::vector<Index> sizes;  ///< G N K C, then filter, input, strides, dilations, left, right pads
  std::string dtype = "fp16";
  bool tf32 = false;
  hc::ConvLayout layout = hc::ConvLayout::kNHWGC;
  hc::Algorithm algorithm = hc::Algorithm::kAuto;
  int split_k = 0;  ///< backward-weight: 0 = the op's choice
  int repeats = 20;
};

/// The seed's default: N 128, K 256, C 128, 3×3 filter, 71×71 input, stride 2, dilation 1, pads 1.
inline std::vector<Index> default_sizes() { return {1, 128, 256, 128, 3, 3, 71, 71, 2, 2, 1, 1, 1, 1, 1, 1}; }
/// Backward-weight's default (3-D): G 4, N 1, K 128, C 256, 3×3×3 filter, 14³ input, stride 1,
/// dilation 1, pads 1.
inline std::vector<Index> default_weight_sizes() {
  return {4, 1, 128, 256, 3, 3, 3, 14, 14, 14, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
}

inline Status parse_layout(const std::string& text, hc::ConvLayout* layout) {
  if (text == "nhwgc")
    *layout = hc::ConvLayout::kNHWGC;
  else if (text == "gnhwc")
    *layout = hc::ConvLayout::kGNHWC;
  else if (text == "ngchw")
    *layout = hc::ConvLayout::kNGCHW;
  else
    return Status::invalid_argument("bad option --layout=" + text + ": expected nhwgc, gnhwc or ngchw");
  return Status::ok();
}

inline Status parse_algorithm(const std::string& text, hc::Algorithm* algorithm) {
  for (int a = 0; a <= static_cast<int>(hc::kLastAlgorithm); ++a) {
    if (text == hc::algorithm_name(static_cast<hc::Algorithm>(a))) {
      *algorithm = static_cast<hc::Algorithm>(a);
      return Status::ok();
    }
  }
  return Status::invalid_argument("bad option --algorithm=" + text +
                                  ": expected auto, gather, matrix, simt, tma_boxes, direct, unfold or staged");
}

/// Reads the sizes (NDim, [G,] N, K, C and 6·NDim spatial values) and the options; `weight`:
/// backward-weight's defaults and its --split-k.
inline Status parse_config(Config* c, bool grouped, bool weight = false) {
  const hh::ExampleArgs& a = c->args;
  HIPGRAD_RETURN_IF_ERROR(weight
                              ? a.reject_unknown_options({"dtype", "tf32", "layout", "algorithm", "repeats", "split-k"})
                              : a.reject_unknown_options({"dtype", "tf32", "layout", "algorithm", "repeats"}));
  if (a.sizes.empty()) {
    c->ndim = weight ? 3 : 2;
    c->sizes = weight ? default_weight_sizes() : default_sizes();
  } else {
    c->ndim = static_cast<int>(a.sizes[0]);
    if (c->ndim < 1 || c->ndim > 3) return Status::invalid_argument("NDim must be 1, 2 or 3");
    const std::size_t expected = 1 + (grouped ? 4 : 3) + 6 * static_cast<std::size_t>(c->ndim);
    if (a.sizes.size() != expected) {
      return Status::invalid_argument("expected " + std::to_string(expected) + " sizes for NDim " +
                                      std::to_string(c->ndim) + ", got " + std::to_string(a.sizes.size()));
    }
    c->sizes.assign(a.sizes.begin() + 1, a.sizes.end());
    if (!grouped) c->sizes.insert(c->sizes.begin(), 1);  // G = 1
  }
  c->dtype = a.get_string("dtype", "fp16");
  if (c->dtype != "fp16" && c->dtype != "bf16" && c->dtype != "fp32") {
    return Status::invalid_argument("bad option --dtype=" + c->dtype + ": expected fp16, bf16 or fp32");
  }
  c->tf32 = a.get_bool("tf32", false);
  const std::int64_t repeats = a.timed_runs(20);
  HIPGRAD_RETURN_IF_ERROR(a.option_status());
  HIPGRAD_RETURN_IF_ERROR(parse_layout(a.get_string("layout", "nhwgc"), &c->layout));
  HIPGRAD_RETURN_IF_ERROR(parse_algorithm(a.get_string("algorithm", "auto"), &c->algorithm));
  if (c->tf32 && c->dtype != "fp32") return Status::invalid_argument("--tf32 applies to --dtype=fp32 only");
  if (repeats < 1 || repeats > 1000000) return Status::invalid_argument("--repeats must be 1 to 1000000");
  c->repeats = static_cast<int>(repeats);
  if (weight) {
    const std::string split = a.get_string("split-k", "auto");
    if (split != "auto") {
      char* end = nullptr;
      const long value = std::strtol(split.c_str(), &end, 10);
      if (end == split.c_str() || *end != '\0' || value < 1 || value > 1024) {
        return Status::invalid_argument("bad option --split-k=" + split + ": expected auto or a count from 1 to 1024");
      }
      c->split_k = static_cast<int>(value);
    }
  }
  return Status::ok();
}

/// The problem of the sizes, in the layout, with the options.
template <int NDim>
hc::Problem<NDim> make_problem(const Config& c) {
  hc::ConvParams<NDim> p;
  p.G = c.sizes[0], p.N = c.sizes[1], p.K = c.sizes[2], p.C = c.sizes[3];
  for (int d = 0; d < NDim; ++d) {
    p.filter[d] = c.sizes[4 + d];
    p.input[d] = c.sizes[4 + NDim + d];
    p.strides[d] = c.sizes[4 + 2 * NDim + d];
    p.dilations[d] = c.sizes[4 + 3 * NDim + d];
    p.left_pads[d] = c.sizes[4 + 4 * NDim + d];
    p.right_pads[d] = c.sizes[4 + 5 * NDim + d];
  }
  hc::Problem<NDim> problem = hc::Problem<NDim>::packed(p, c.layout);
  problem.allow_tf32 = c.tf32;
  problem.algorithm = c.algorithm;
  problem.split_k = c.split_k;
  return problem;
}

/// --dry-run: what the command line selects, printed without touching a GPU; the exit status.
inline int print_dry_run(const Config& c, const char* program) {
  auto report = [&](auto problem) {
    const hipgrad::Status valid = problem.validate();
    std::printf("%s: verify %d, init %s, time %d (%d runs), dtype %s, %s\n", program, c.args.verify ? 1 : 0,
                hh::init_method_name(c.args.init), c.args.time ? 1 : 0, c.args.time ? c.repeats : 0, c.dtype.c_str(),
                problem.to_string().c_str());
    if (!valid.is_ok()) std::fprintf(stderr, "%s: %s\n", program, valid.to_string().c_str());
    return valid.is_ok() ? 0 : 2;
  };
  if (c.ndim == 1) return report(make_problem<1>(c));
  if (c.ndim == 3) return report(make_problem<3>(c));
  return report(make_problem<2>(c));
}

/// "[2, 3, 4] strides [24, 8, 1]" for a tensor's lengths and strides.
inline std::string describe(const std::vector<Index>& lengths, const std::vector<Index>& strides) {
  return hipgrad::lengths_to_string(lengths) + " strides " + hipgrad::lengths_to_string(strides);
}

/// Prints the verification's summary and the timing line; the exit status.
inline int finish(bool verify, const hh::CheckResult& r, bool time, float ms, double flops, double bytes) {
  if (verify) std::printf("verification: %s\n", r.report.c_str());
  if (time) {
    std::printf("Perf: %.4f ms, %.2f TFlops, %.2f GB/s\n", ms, flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
  }
  return verify && !r.ok ? 1 : 0;
}

/// Tolerance of dx for sums of `terms` products: integer data (up to 25 each) or decimals, TF32.
template <typename T>
hh::Tolerance sum_tolerance(Index terms, bool integers, bool tf32) {
  hh::Tolerance tol = hh::sum_tolerance<T>(terms, integers ? 25 : 1);
  if (tf32) tol.rtol += 0x1.0p-10, tol.atol += 0x1.0p-9 * std::sqrt(static_cast<double>(terms));
  return tol;
}

/// One gradient op as the examples run it: Gradient<T, NDim> names its Op, its two inputs and its
/// output (kNames, lengths(problem, i), strides(problem, i) for i = 0, 1, 2), args(a, b, out),
/// reference(a, b, expected, params) and the terms of each output's sum. Prints the tensors, the
/// op's name, the check against the CPU reference and the timing line; the exit status.
template <typename Gradient, typename T, int NDim>
int run_gradient(const Config& c, const char* program) {
  using Op = typename Gradient::Op;
  const hc::Problem<NDim> problem = make_problem<NDim>(c);
  const hc::ConvParams<NDim>& p = problem.params;
  const Status valid = problem.validate();
  if (!valid.is_ok()) {
    std::fprintf(stderr, "%s: %s\n", program, valid.to_string().c_str());
    return 2;
  }
  hh::Tensor<T> a(Gradient::lengths(problem, 0), Gradient::strides(problem, 0));
  hh::Tensor<T> b(Gradient::lengths(problem, 1), Gradient::strides(problem, 1));
  hh::Tensor<T> out(Gradient::lengths(problem, 2), Gradient::strides(problem, 2));
  hh::fill(a, c.args.init, 1);
  hh::fill(b, c.args.init, 2);
  std::memset(out.data(), 0xff, out.storage_bytes());  // NaN: the op must write every element
  std::printf("%s %s, init %s\n", p.to_string().c_str(), c.dtype.c_str(), hh::init_method_name(c.args.init));
  for (int i = 0; i < 3; ++i) {
    std::printf("%-2s %s\n", Gradient::kNames[i],
                describe(Gradient::lengths(problem, i), Gradient::strides(problem, i)).c_str());
  }

  const int copies = c.args.time ? hh::l2_rotation_copies(a.storage_bytes() + b.storage_bytes()) : 1;
  hh::DeviceBuffer<T> da, db, dout;
  hh::DeviceBuffer<unsigned char> workspace;
  Status s = upload_copies(a, copies, &da);
  if (s.is_ok()) s = upload_copies(b, copies, &db);
  if (s.is_ok()) s = upload_copies(out, 1, &dout);
  if (s.is_ok()) s = workspace.allocate(Op::workspace_size(problem));
  auto args = [&](int i) {
    const std::size_t copy = static_cast<std::size_t>(i % copies);
    return Gradient::args(da.data() + copy * a.storage().size(), db.data() + copy * b.storage().size(), dout.data());
  };
  if (s.is_ok()) s = Op::can_implement(problem, args(0));
  if (s.is_ok()) std::printf("%s on %s\n", Op::name(problem, args(0)).c_str(), hh::device_description().c_str());
  if (s.is_ok()) s = Op::run(problem, args(0), workspace.data(), workspace.bytes(), nullptr);
  if (s.is_ok()) s = dout.copy_to(out);  // synchronous: also reports the kernel's errors
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
    hh::Tensor<double> expected(Gradient::lengths(problem, 2));
    const Status ref = Gradient::reference(a, b, expected, p);
    if (!ref.is_ok()) {
      std::fprintf(stderr, "%s: reference: %s\n", program, ref.to_string().c_str());
      return 1;
    }
    r = hh::check_close(out, expected,
                        sum_tolerance<T>(Gradient::terms(p), c.args.init == hh::InitMethod::kIntegers, c.tf32));
  }
  const double bytes =
      static_cast<double>(sizeof(T)) * static_cast<double>(a.num_elements() + b.num_elements() + out.num_elements());
  return finish(c.args.verify, r, c.args.time, ms, static_cast<double>(p.flops()), bytes);
}

}  // namespace conv_example
