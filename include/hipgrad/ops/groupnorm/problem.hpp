/// @file problem.hpp
/// @brief GroupNorm problems (forward and backward): lengths [N, C, spatial...], the group count,
///        each tensor's strides, epsilon and the fused activation, with validation.
///
/// Host-only. Every tensor is described in logical order [N, C, D?, H?, W?] (spatial rank 0 to 3)
/// with its own strides in elements, so NCHW, NHWC and any other layout are choices of strides.
/// γ, β, dγ, dβ are dense [C]; mean and rstd are dense [N, G] in fp32.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"

namespace hipgrad::groupnorm {

inline constexpr int kMaxRank = 5;  ///< [N, C, D, H, W]

/// Lengths and strides of one activation tensor, in logical order.
struct TensorShape {
  int rank = 0;
  std::array<Index, kMaxRank> lengths{};
  std::array<Index, kMaxRank> strides{};

  Index n() const { return lengths[0]; }
  Index c() const { return lengths[1]; }
  /// Product of the spatial lengths (1 for spatial rank 0).
  Index spatial_size() const {
    Index s = 1;
    for (int d = 2; d < rank; ++d) s *= lengths[d];
    return s;
  }
  Index num_elements() const { return n() * c() * spatial_size(); }
  /// Elements of memory the strides span (0 when empty).
  Index element_space() const {
    Index space = 1;
    for (int d = 0; d < rank; ++d) space += (lengths[d] - 1) * strides[d];
    return num_elements() == 0 ? 0 : space;
  }
  /// Spatial dimensions packed row-major, innermost at stride `inner`.
  bool spatial_packed(Index inner) const {
    Index expected = inner;
    for (int d = rank - 1; d >= 2; --d) {
      if (lengths[d] != 1 && strides[d] != expected) return false;
      expected *= lengths[d];
    }
    return true;
  }
  /// Each (n, c) spatial plane contiguous, planes packed (NCHW and its 1-D/3-D kin).
  bool channel_planes() const {
    const Index s = spatial_size();
    return spatial_packed(1) && (c() == 1 || strides[1] == s) && (n() == 1 || strides[0] == c() * s);
  }
  /// Each position's channels contiguous, positions packed (NHWC and kin).
  bool channels_last() const {
    const Index s = spatial_size();
    return (c() == 1 || strides[1] == 1) && spatial_packed(c()) && (n() == 1 || strides[0] == c() * s);
  }
};

/// A TensorShape from vectors (rank 2 to 5); invalid_argument when they do not fit.
inline Status make_tensor_shape(const std::vector<Index>& lengths, const std::vector<Index>& strides, const char* name,
                                TensorShape* shape) {
  if (lengths.size() < 2 || lengths.size() > static_cast<std::size_t>(kMaxRank)) {
    return Status::invalid_argument(std::string(name) + ": rank must be 2 to 5 ([N, C, spatial...]), got " +
                                    std::to_string(lengths.size()));
  }
  if (strides.size() != lengths.size()) {
    return Status::invalid_argument(std::string(name) + ": " + std::to_string(strides.size()) + " strides for " +
                                    std::to_string(lengths.size()) + " lengths");
  }
  shape->rank = static_cast<int>(lengths.size());
  for (int d = 0; d < shape->rank; ++d) {
    if (lengths[d] <= 0) {
      return Status::invalid_argument(std::string(name) + ": length " + std::to_string(lengths[d]) + " in dimension " +
                                      std::to_string(d) + " must be positive");
    }
    if (strides[d] < 0) {
      return Status::invalid_argument(std::string(name) + ": negative stride in dimension " + std::to_string(d));
    }
    shape->lengths[d] = lengths[d];
    shape->strides[d] = strides[d];
  }
  return Status::ok();
}

namespace detail {

/// True when no two distinct logical indices of `shape` share a memory element (so writes
/// through it cannot race). Checked by sorting the dimensions by stride: each stride must
/// reach past everything the smaller ones span.
inline bool strides_are_one_to_one(const TensorShape& shape) {
  std::array<int, kMaxRank> order{};
  for (int d = 0; d < shape.rank; ++d) order[d] = d;
  for (int i = 1; i < shape.rank; ++i)  // insertion sort by stride
    for (int j = i; j > 0 && shape.strides[order[j]] < shape.strides[order[j - 1]]; --j)
      std::swap(order[j], order[j - 1]);
  Index span = 1;  // elements covered by the dimensions taken so far
  for (int i = 0; i < shape.rank; ++i) {
    const int d = order[i];
    if (shape.lengths[d] == 1) continue;
    if (shape.strides[d] < span) return false;
    span = shape.strides[d] * (shape.lengths[d] - 1) + span;
  }
  return true;
}

inline Status validate_common(const TensorShape& x, Index groups) {
  if (x.rank < 2 || x.rank > kMaxRank) {
    return Status::invalid_argument("x: rank must be 2 to 5 ([N, C, spatial...]), got " + std::to_string(x.rank));
  }
  for (int d = 0; d < x.rank; ++d) {
    if (x.lengths[d] <= 0) {
      return Status::invalid_argument("x: length " + std::to_string(x.lengths[d]) + " in dimension " +
                                      std::to_string(d) + " must be positive");
    }
  }
  if (groups <= 0) return Status::invalid_argument("G must be positive, got " + std::to_string(groups));
  if (x.c() % groups != 0) {
    return Status::invalid_argument("C=" + std::to_string(x.c()) + " is not divisible by G=" + std::to_string(groups));
  }
  if (x.num_elements() / x.n() / x.c() != x.spatial_size()) return Status::invalid_argument("sizes overflow");
  return Status::ok();
}

inline Status same_lengths(const TensorShape& x, const TensorShape& other, const char* name) {
  if (x.rank != other.rank || x.lengths != other.lengths) {
    return Status::invalid_argument(std::string(name) + " must have the lengths of x");
  }
  for (int d = 0; d < other.rank; ++d) {
    if (other.strides[d] < 0 || x.strides[d] < 0) {
      return Status::invalid_argument(std::string(name) + " or x has a negative stride");
    }
  }
  return Status::ok();
}

inline Status validate_activation(Activation activation, float swish_beta) {
  if (activation == Activation::kSwish && !std::isfinite(swish_beta))
    return Status::invalid_argument("swish beta must be finite");
  return Status::ok();
}

inline Status writable(const TensorShape& shape, const char* name) {
  if (!strides_are_one_to_one(shape)) {
    return Status::invalid_argument(std::string(name) + "'s strides map two elements to one address");
  }
  return Status::ok();
}

}  // namespace detail

/// How an op reads its inputs.
enum class Algorithm {
  /// The choice that measured fastest for problems like this one, picked by rules on the layout
  /// and sizes (nothing is timed at run time).
  kAuto,
  /// One launch whose blocks hold a unit in registers: x (and dy) read from memory once. A unit
  /// is a group (planes) or a band of adjacent groups (channels last); it spans one block, or on
  /// GPUs with thread-block clusters (sm_90) up to 8 blocks that add their partial sums through
  /// each other's shared memory. Packed planes (NCHW and kin) with 16-byte aligned pointers and a
  /// plane size divisible by the vector, or packed channels last (NHWC and kin) with an even
  /// number of channels per group and pointers aligned for pairs, and a unit that fits (about 40 K
  /// elements of x and dy per block in the backward, 64 K of x in the forward, for 16-bit data;
  /// half that for fp32); not_supported, with the reason, otherwise.
  kOneRead,
  /// Sums per tile, then statistics per group, then the output: any layout, x (and dy) read twice.
  kThreePass,
  /// One launch whose blocks copy a unit (a band of adjacent channels-last groups) into shared
  /// memory, asynchronously in 16-byte vectors, then sum it and write the output from there: x
  /// (and dy) read from memory once. Packed channels last (NHWC and kin) with 16-byte aligned
  /// pointers, channels a multiple of the vector (8 fp16/bf16, 4 fp32), a band of groups whose
  /// channels are too, and a unit that fits the shared memory of one block, or on GPUs with
  /// thread-block clusters (sm_90) of up to 8 blocks (16 where the GPU has room for them);
  /// not_supported, with the reason, otherwise.
  kStaged,
};

inline const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kOneRead: return "one_read";
    case Algorithm::kThreePass: return "three_pass";
    case Algorithm::kStaged: return "staged";
  }
  return "unknown";
}

namespace detail {

inline Status validate_algorithm(Algorithm algorithm) {
  const int a = static_cast<int>(algorithm);
  if (a < static_cast<int>(Algorithm::kAuto) || a > static_cast<int>(Algorithm::kStaged))
    return Status::invalid_argument("unknown algorithm " + std::to_string(a));
  return Status::ok();
}

}  // namespace detail

/// y = act(γ·(x − μ)·rstd + β), statistics over each group of C/G channels × spatial.
struct ForwardProblem {
  TensorShape x;  ///< input
  TensorShape y;  ///< output: the lengths of x, its own strides
  Index groups = 1;
  float epsilon = 1e-5f;
  Activation activation = Activation::kIdentity;
  float swish_beta = 1.0f;
  Algorithm algorithm = Algorithm::kAuto;

  /// Packed problem in one of the two common layouts.
  static ForwardProblem packed(const std::vector<Index>& lengths, Index groups, bool channels_last);

  Status validate() const {
    HIPGRAD_RETURN_IF_ERROR(detail::validate_common(x, groups));
    HIPGRAD_RETURN_IF_ERROR(detail::same_lengths(x, y, "y"));
    HIPGRAD_RETURN_IF_ERROR(detail::writable(y, "y"));
    if (!(epsilon > 0.0f) || !std::isfinite(epsilon)) {
      return Status::invalid_argument("epsilon must be positive and finite, got " + std::to_string(epsilon));
    }
    HIPGRAD_RETURN_IF_ERROR(detail::validate_algorithm(algorithm));
    return detail::validate_activation(activation, swish_beta);
  }
};

/// The backward of ForwardProblem: dx from dy (through the activation when fused), and dγ, dβ.
struct BackwardProblem {
  TensorShape x;   ///< the forward's input
  TensorShape dy;  ///< gradient of the forward's output (after the activation when fused)
  TensorShape dx;  ///< gradient of x
  Index groups = 1;
  Activation activation = Activation::kIdentity;
  float swish_beta = 1.0f;
  Algorithm algorithm = Algorithm::kAuto;

  static BackwardProblem packed(const std::vector<Index>& lengths, Index groups, bool channels_last);

  Status validate() const {
    HIPGRAD_RETURN_IF_ERROR(detail::validate_common(x, groups));
    HIPGRAD_RETURN_IF_ERROR(detail::same_lengths(x, dy, "dy"));
    HIPGRAD_RETURN_IF_ERROR(detail::same_lengths(x, dx, "dx"));
    HIPGRAD_RETURN_IF_ERROR(detail::writable(dx, "dx"));
    HIPGRAD_RETURN_IF_ERROR(detail::validate_algorithm(algorithm));
    return detail::validate_activation(activation, swish_beta);
  }
};

namespace detail {

inline TensorShape packed_shape(const std::vector<Index>& lengths, bool channels_last) {
  std::vector<int> order(lengths.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  if (channels_last && order.size() > 2) {  // N, spatial..., C
    order.erase(order.begin() + 1);
    order.push_back(1);
  }
  TensorShape shape;
  // Lengths are validated later: a bad vector leaves a shape whose validate() names the fault
  // (its rank, or the length that is not positive).
  if (make_tensor_shape(lengths, strides_for_order(lengths, order), "x", &shape).is_ok()) return shape;
  shape = TensorShape{};
  if (lengths.size() < 2 || lengths.size() > static_cast<std::size_t>(kMaxRank)) return shape;
  shape.rank = static_cast<int>(lengths.size());
  for (int d = 0; d < shape.rank; ++d) shape.lengths[d] = lengths[d];
  return shape;
}

}  // namespace detail

inline ForwardProblem ForwardProblem::packed(const std::vector<Index>& lengths, Index groups, bool channels_last) {
  ForwardProblem p;
  p.x = p.y = detail::packed_shape(lengths, channels_last);
  p.groups = groups;
  return p;
}

inline BackwardProblem BackwardProblem::packed(const std::vector<Index>& lengths, Index groups, bool channels_last) {
  BackwardProblem p;
  p.x = p.dy = p.dx = detail::packed_shape(lengths, channels_last);
  p.groups = groups;
  return p;
}

}  // namespace hipgrad::groupnorm
