/// @file problem.hpp
/// @brief ConvParams: one descriptor of a grouped N-D convolution for every direction, with its
///        validation, tensor lengths and the memory orders of the supported layouts; Problem: the
///        convolution ops' problem (ConvParams, each tensor's strides, TF32, split, algorithm).
///
/// Host-only (no GPU header). Tensors are described in logical order — input [G, N, C, spatial...],
/// weight [G, K, C, filter...], output [G, N, K, spatial...] — with C and K counted per group; a
/// layout is a choice of strides, which strides_for_order() builds from the orders below.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::conv {

/// Memory layouts of activations (named for 2-D; 1-D and 3-D drop or add the spatial letters).
/// Weights are GKYXC for kNHWGC and kGNHWC, GKCYX for kNGCHW.
enum class ConvLayout { kNHWGC, kGNHWC, kNGCHW };

namespace detail {

/// ⌊a / b⌋ for b > 0; C++ division truncates towards zero, which is wrong for a < 0.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

template <std::size_t R>
std::string join(const std::array<std::int64_t, R>& values, const char* separator) {
  std::string s;
  for (std::size_t i = 0; i < R; ++i) s += (i ? separator : "") + std::to_string(values[i]);
  return s;
}

/// The spatial letters of a layout name: W, HW or DHW (filters: X, YX, ZYX).
inline std::string spatial_letters(int ndim, bool filter) {
  const std::string all = filter ? "ZYX" : "DHW";
  return all.substr(all.size() - static_cast<std::size_t>(ndim));
}

}  // namespace detail

template <int NDimSpatial>
struct ConvParams {
  static_assert(NDimSpatial >= 1 && NDimSpatial <= 3, "ConvParams supports 1, 2 or 3 spatial dimensions");
  static constexpr int kNDimSpatial = NDimSpatial;
  using Lengths = std::array<std::int64_t, NDimSpatial>;

  std::int64_t G = 0, N = 0, K = 0, C = 0;  ///< C and K are per group
  Lengths filter{}, input{}, strides{}, dilations{}, left_pads{}, right_pads{};

  /// Output length per spatial dimension; ≤ 0 when the filter does not fit (validate() says why).
  Lengths output_spatial() const {
    Lengths out{};
    for (int d = 0; d < NDimSpatial; ++d) out[d] = output_length(d);
    return out;
  }

  std::vector<Index> input_lengths() const { return logical_lengths(G, N, C, input); }
  std::vector<Index> weight_lengths() const { return logical_lengths(G, K, C, filter); }
  std::vector<Index> output_lengths() const { return logical_lengths(G, N, K, output_spatial()); }

  /// Multiply-adds counted as two operations, padding taps included (the usual convention).
  std::int64_t flops() const {
    std::int64_t f = 2 * G * N * K * C;
    for (int d = 0; d < NDimSpatial; ++d) f *= filter[d] * output_length(d);
    return f;
  }

  Status validate() const {
    HIPGRAD_RETURN_IF_ERROR(validate_sizes());
    for (int d = 0; d < NDimSpatial; ++d) HIPGRAD_RETURN_IF_ERROR(validate_dimension(d));
    return Status::ok();
  }

  /// E.g. "conv2d_G2_N4_K8_C3_filter3x3_input32x32_stride2x2_dilation1x1_pads1x1_1x1".
  std::string to_string() const {
    return "conv" + std::to_string(NDimSpatial) + "d_G" + std::to_string(G) + "_N" + std::to_string(N) + "_K" +
           std::to_string(K) + "_C" + std::to_string(C) + "_filter" + detail::join(filter, "x") + "_input" +
           detail::join(input, "x") + "_stride" + detail::join(strides, "x") + "_dilation" +
           detail::join(dilations, "x") + "_pads" + detail::join(left_pads, "x") + "_" + detail::join(right_pads, "x");
  }

 private:
  std::int64_t output_length(int d) const {
    if (strides[d] <= 0) return 0;  // validate() reports the stride; avoid dividing by it
    const std::int64_t reach = dilations[d] * (filter[d] - 1) + 1;
    return detail::floor_div(input[d] + left_pads[d] + right_pads[d] - reach, strides[d]) + 1;
  }

  static std::vector<Index> logical_lengths(std::int64_t a, std::int64_t b, std::int64_t c, const Lengths& s) {
    std::vector<Index> lengths{a, b, c};
    lengths.insert(lengths.end(), s.begin(), s.end());
    return lengths;
  }

  Status validate_sizes() const {
    const std::pair<const char*, std::int64_t> sizes[] = {{"G", G}, {"N", N}, {"K", K}, {"C", C}};
    for (const auto& [name, value] : sizes) {
      if (value <= 0) {
        return Status::invalid_argument(std::string(name) + " must be positive, got " + std::to_string(value));
      }
    }
    return Status::ok();
  }

  Status validate_dimension(int d) const {
    const std::string where = " in dimension " + std::to_string(d);
    const std::pair<const char*, std::int64_t> sizes[] = {{"filter length ", filter[d]},
                                                          {"input length ", input[d]},
                                                          {"stride ", strides[d]},
                                                          {"dilation ", dilations[d]}};
    for (const auto& [name, value] : sizes) {
      if (value <= 0) return Status::invalid_argument(name + std::to_string(value) + where + " must be positive");
    }
    if (left_pads[d] < 0 || right_pads[d] < 0) {
      return Status::invalid_argument("negative padding" + where + " (left " + std::to_string(left_pads[d]) +
                                      ", right " + std::to_string(right_pads[d]) + ")");
    }
    if (output_length(d) <= 0) {
      return Status::invalid_argument("output length" + where + " would be " + std::to_string(output_length(d)) + " (" +
                                      describe_dimension(d) + ")");
    }
    return Status::ok();
  }

  std::string describe_dimension(int d) const {
    return "input " + std::to_string(input[d]) + ", filter " + std::to_string(filter[d]) + ", dilation " +
           std::to_string(dilations[d]) + ", pads " + std::to_string(left_pads[d]) + "+" +
           std::to_string(right_pads[d]) + ", stride " + std::to_string(strides[d]);
  }
};

/// Memory order (slowest first) of an input or output tensor, whose logical dimensions are
/// [G, N, C or K, spatial...]; pass it to strides_for_order().
template <int NDimSpatial>
std::vector<int> activation_order(ConvLayout layout) {
  static_assert(NDimSpatial >= 1 && NDimSpatial <= 3, "activation_order supports 1, 2 or 3 spatial dimensions");
  std::vector<int> order;
  auto append_spatial = [&order] {
    for (int d = 0; d < NDimSpatial; ++d) order.push_back(3 + d);
  };
  switch (layout) {
    case ConvLayout::kNHWGC:
      order = {1};
      append_spatial();
      order.insert(order.end(), {0, 2});
      break;
    case ConvLayout::kGNHWC:
      order = {0, 1};
      append_spatial();
      order.push_back(2);
      break;
    case ConvLayout::kNGCHW:
      order = {1, 0, 2};
      append_spatial();
      break;
  }
  return order;
}

/// Memory order (slowest first) of a weight tensor [G, K, C, filter...]: GKYXC, or GKCYX for kNGCHW.
template <int NDimSpatial>
std::vector<int> weight_order(ConvLayout layout) {
  static_assert(NDimSpatial >= 1 && NDimSpatial <= 3, "weight_order supports 1, 2 or 3 spatial dimensions");
  std::vector<int> order = {0, 1};
  if (layout == ConvLayout::kNGCHW) order.push_back(2);
  for (int d = 0; d < NDimSpatial; ++d) order.push_back(3 + d);
  if (layout != ConvLayout::kNGCHW) order.push_back(2);
  return order;
}

/// Packed strides of the three tensors of `p` in `layout`.
template <int NDimSpatial>
std::vector<Index> input_strides(const ConvParams<NDimSpatial>& p, ConvLayout layout) {
  return strides_for_order(p.input_lengths(), activation_order<NDimSpatial>(layout));
}
template <int NDimSpatial>
std::vector<Index> weight_strides(const ConvParams<NDimSpatial>& p, ConvLayout layout) {
  return strides_for_order(p.weight_lengths(), weight_order<NDimSpatial>(layout));
}
template <int NDimSpatial>
std::vector<Index> output_strides(const ConvParams<NDimSpatial>& p, ConvLayout layout) {
  return strides_for_order(p.output_lengths(), activation_order<NDimSpatial>(layout));
}

/// The paths of the convolution ops (their implicit GEMM's mainloops, gemm::Path): kAuto chooses;
/// any other value forces that path, and an op that cannot run it says why (not_supported).
enum class Algorithm {
  kAuto,
  kGather,    ///< the warp-specialised gather kernel (sm_90a)
  kMatrix,    ///< the cp.async matrix mainloops (wgmma, mma.sync, MFMA)
  kSimt,      ///< the FMA mainloop: any strides, any alignment, exact fp32
  kTmaBoxes,  ///< the warp-specialised kernel with TMA box copies of the operands' positions
              ///< (sm_90a, channels contiguous; both ops; kAuto's rules: docs/conv.md)
  kDirect,    ///< direct kernels for few channels per group (ops/conv/direct/): any GPU, any
              ///< layout; kAuto's rule: direct/heuristics.hpp
  kUnfold,    ///< x's windows unfolded into the columns of one dense GEMM (common/unfold.hpp):
              ///< one group, at most 1024 taps × C and 1024 K; kAuto's rule: C not whole vectors
  kStaged,    ///< the tensors copied channels-last with whole-vector channels into the workspace,
              ///< the op run there (common/staged.hpp); kAuto's rule: NCHW or odd channels that
              ///< would take the gather GEMM
};

/// The last Algorithm, for loops over them all.
inline constexpr Algorithm kLastAlgorithm = Algorithm::kStaged;

inline const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kGather: return "gather";
    case Algorithm::kMatrix: return "matrix";
    case Algorithm::kSimt: return "simt";
    case Algorithm::kTmaBoxes: return "tma_boxes";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kUnfold: return "unfold";
    case Algorithm::kStaged: return "staged";
  }
  return "unknown";
}

/// The problem of every convolution op: the convolution and each tensor's strides in logical
/// order — input (x or dx) [G, N, C, spatial...], weight (w or dw) [G, K, C, filter...], output
/// (y or dy) [G, N, K, spatial...] — in elements. NHWGC, GNHWC, NGCHW and their 1-D/3-D kin are
/// choices of strides (packed()); any others are allowed, also padded ones.
template <int NDimSpatial>
struct Problem {
  ConvParams<NDimSpatial> params;
  std::vector<Index> input_strides;
  std::vector<Index> weight_strides;
  std::vector<Index> output_strides;
  bool allow_tf32 = false;  ///< fp32 data may run on TF32 matrix units (never without this)
  int split_k = 0;          ///< backward-weight: K splits (the direct path's slices), 0 = the op's choice
  Algorithm algorithm = Algorithm::kAuto;

  /// The packed tensors of `params` in `layout`.
  static Problem packed(const ConvParams<NDimSpatial>& params, ConvLayout layout = ConvLayout::kNHWGC) {
    Problem p;
    p.params = params;
    p.input_strides = conv::input_strides(params, layout);
    p.weight_strides = conv::weight_strides(params, layout);
    p.output_strides = conv::output_strides(params, layout);
    return p;
  }

  /// invalid_argument naming what is wrong: the convolution, a stride list of the wrong rank or
  /// with a negative stride, a tensor that spans more than 2^62 elements, a negative split, an
  /// unknown algorithm.
  Status validate() const {
    HIPGRAD_RETURN_IF_ERROR(params.validate());
    HIPGRAD_RETURN_IF_ERROR(validate_strides("input", input_strides, params.input_lengths()));
    HIPGRAD_RETURN_IF_ERROR(validate_strides("weight", weight_strides, params.weight_lengths()));
    HIPGRAD_RETURN_IF_ERROR(validate_strides("output", output_strides, params.output_lengths()));
    if (split_k < 0)
      return Status::invalid_argument("split_k must be 0 (auto) or positive, got " + std::to_string(split_k));
    if (static_cast<int>(algorithm) < 0 || static_cast<int>(algorithm) > static_cast<int>(kLastAlgorithm)) {
      return Status::invalid_argument("unknown algorithm " + std::to_string(static_cast<int>(algorithm)));
    }
    return Status::ok();
  }

  /// Elements a tensor's strides span: 1 + Σ (length − 1)·stride (what its pointer must address).
  static Index element_space(const std::vector<Index>& lengths, const std::vector<Index>& strides) {
    Index space = 1;
    for (std::size_t i = 0; i < lengths.size(); ++i) space += (lengths[i] - 1) * strides[i];
    return space;
  }

  std::string to_string() const {
    return params.to_string() + "_in" + lengths_to_string(input_strides) + "_wei" + lengths_to_string(weight_strides) +
           "_out" + lengths_to_string(output_strides) + (allow_tf32 ? "_tf32" : "") +
           (split_k > 0 ? "_splitk" + std::to_string(split_k) : "") + "_" + algorithm_name(algorithm);
  }

 private:
  static Status validate_strides(const char* name, const std::vector<Index>& strides,
                                 const std::vector<Index>& lengths) {
    if (strides.size() != lengths.size()) {
      return Status::invalid_argument(std::string(name) + " strides have " + std::to_string(strides.size()) +
                                      " entries, the tensor " + std::to_string(lengths.size()) +
                                      " dimensions [G, N or K, C or K, spatial...]");
    }
    constexpr Index kLimit = Index{1} << 62;
    Index space = 1;
    for (std::size_t i = 0; i < strides.size(); ++i) {
      if (strides[i] < 0) {
        return Status::invalid_argument(std::string(name) + " stride " + std::to_string(i) + " is negative (" +
                                        std::to_string(strides[i]) + ")");
      }
      if (strides[i] > 0 && lengths[i] - 1 > (kLimit - space) / strides[i]) {
        return Status::invalid_argument(std::string(name) + " tensor spans more than 2^62 elements");
      }
      space += (lengths[i] - 1) * strides[i];
    }
    return Status::ok();
  }
};

/// Layout names for a rank: activations "NHWGC"/"NDHWGC"/"NWGC"..., weights "GKYXC"/"GKCZYX"...
template <int NDimSpatial>
std::string activation_layout_name(ConvLayout layout) {
  const std::string s = detail::spatial_letters(NDimSpatial, false);
  switch (layout) {
    case ConvLayout::kNHWGC: return "N" + s + "GC";
    case ConvLayout::kGNHWC: return "GN" + s + "C";
    case ConvLayout::kNGCHW: return "NGC" + s;
  }
  return "unknown";
}
template <int NDimSpatial>
std::string weight_layout_name(ConvLayout layout) {
  const std::string s = detail::spatial_letters(NDimSpatial, true);
  return layout == ConvLayout::kNGCHW ? "GKC" + s : "GK" + s + "C";
}

}  // namespace hipgrad::conv
