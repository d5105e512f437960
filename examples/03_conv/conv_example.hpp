/// @file conv_example.hpp
/// @brief What the convolution examples share: the seed's command line (NDim [G] N K C, then per
///        spatial dimension the filter, input, strides, dilations, left and right pads), the
///        options, tensors in a layout, a run on the device, the CPU check and the timing line.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
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
    "  --algorithm=auto              auto, gather, matrix, simt or tma_boxes (a forced one that cannot run is an error)\n"
    "  --repeats=20                  timed runs when time=1\n";

/// The command line's convolution, dtype and options; `grouped`: the sizes start NDim G N K C.
struct Config {
  hh::ExampleArgs args;
  int ndim = 2;
  std::vector<Index> sizes;  ///< G N K C, then filter, input, strides, dilations, left, right pads
  std::string dtype = "fp16";
  bool tf32 = false;
  hc::ConvLayout layout = hc::ConvLayout::kNHWGC;
  hc::Algorithm algorithm = hc::Algorithm::kAuto;
  int repeats = 20;
};

/// The seed's default: N 128, K 256, C 128, 3×3 filter, 71×71 input, stride 2, dilation 1, pads 1.
inline std::vector<Index> default_sizes() { return {1, 128, 256, 128, 3, 3, 71, 71, 2, 2, 1, 1, 1, 1, 1, 1}; }

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
  for (hc::Algorithm a : {hc::Algorithm::kAuto, hc::Algorithm::kGather, hc::Algorithm::kMatrix, hc::Algorithm::kSimt,
                          hc::Algorithm::kTmaBoxes}) {
    if (text == hc::algorithm_name(a)) {
      *algorithm = a;
      return Status::ok();
    }
  }
  return Status::invalid_argument("bad option --algorithm=" + text + ": expected auto, gather, matrix, simt or tma_boxes");
}

/// Reads the sizes (NDim, [G,] N, K, C and 6·NDim spatial values) and the options.
inline Status parse_config(Config* c, bool grouped) {
  const hh::ExampleArgs& a = c->args;
  HIPGRAD_RETURN_IF_ERROR(a.reject_unknown_options({"dtype", "tf32", "layout", "algorithm", "repeats"}));
  if (a.sizes.empty()) {
    c->sizes = default_sizes();
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
  const std::int64_t repeats = a.get_int("repeats", 20);
  HIPGRAD_RETURN_IF_ERROR(a.option_status());
  HIPGRAD_RETURN_IF_ERROR(parse_layout(a.get_string("layout", "nhwgc"), &c->layout));
  HIPGRAD_RETURN_IF_ERROR(parse_algorithm(a.get_string("algorithm", "auto"), &c->algorithm));
  if (c->tf32 && c->dtype != "fp32") return Status::invalid_argument("--tf32 applies to --dtype=fp32 only");
  if (repeats < 1 || repeats > 1000000) return Status::invalid_argument("--repeats must be 1 to 1000000");
  c->repeats = static_cast<int>(repeats);
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
  return problem;
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

}  // namespace conv_example
