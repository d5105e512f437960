/// @file fast_swish.hpp
/// @brief Swish for the kernels on the special-function units (core/device_intrinsics.hpp's
///        fast_exp2 and fast_reciprocal): σ, pairs of values sharing one reciprocal, and the
///        forward's Swish with its scale folded into the affine step. Device code only; the CPU
///        reference and the host use activation.hpp's exact formulas.
#pragma once

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"

namespace hipgrad::groupnorm::detail {

// The special-function units bound the Swish loops once each value costs one 2^x and one
// reciprocal, so pairs (or fours) of values share a reciprocal below.

inline constexpr float kLog2E = 1.4426950408889634f;

/// σ(β·z) = 1 / (1 + 2^(−β·log2(e)·z)). The exponential may overflow to infinity, whose
/// reciprocal is the 0 that σ tends to; β·log2(e) is the same for every element, so the compiler
/// computes it once.
HIPGRAD_DEVICE HIPGRAD_INLINE float fast_sigmoid(float z, float beta) {
  return fast_reciprocal(1.0f + fast_exp2(z * (beta * -kLog2E)));
}

/// What fast_swish_pair needs of β, computed once per thread.
struct SwishConstants {
  float exponent_scale;  ///< −|β|·log2(e), or −2^-149 for β = 0 (see below)
  bool negative_beta;

  /// For β = 0 the scale is −2^-149 (the least denormal) rather than −0, so that an infinite z
  /// gives exp(−∞) = 0 instead of the NaN of ∞·0, which the shared reciprocal would pass to the
  /// pair's other value; every finite z still gives e = 1 (|z|·2^-149 < 2^-20).
  HIPGRAD_DEVICE static SwishConstants of(float beta) {
    const float scale = fabsf(beta) * kLog2E;
    return {scale > 0.0f ? -scale : -0x1p-149f, beta < 0.0f};
  }
};

/// z·σ(β·z) for two values of the same channel with one reciprocal. σ(u) = m / d with d = 1 + e,
/// e = exp(−|u|) in [0, 1], m = 1 where u ≥ 0 and e where u < 0: each d lies in [1, 2], so d0·d1
/// cannot overflow and 1 / d0 = d1 / (d0·d1). A NaN reaches the partner through the shared
/// reciprocal, so both values must be of one channel: a NaN there comes from γ, β or the group's
/// statistics and is in every value of the channel already. Below β·z ≈ −87 the exponential
/// flushes to 0, and so does the result (its exact value is below |z|·2^-126).
HIPGRAD_DEVICE HIPGRAD_INLINE void fast_swish_pair(float& z0, float& z1, SwishConstants c) {
  const float e0 = fast_exp2(fabsf(z0) * c.exponent_scale);
  const float e1 = fast_exp2(fabsf(z1) * c.exponent_scale);
  const float d0 = 1.0f + e0, d1 = 1.0f + e1;
  const float r = fast_reciprocal(d0 * d1);
  z0 = ((z0 >= 0.0f) != c.negative_beta ? z0 : z0 * e0) * (d1 * r);
  z1 = ((z1 >= 0.0f) != c.negative_beta ? z1 : z1 * e1) * (d0 * r);
}

/// Swish from the affine step scaled by k = β·log2(e): with u = k·z, σ(β·z) = m / d where
/// e = 2^-|u|, d = 1 + e and m = 1 (u ≥ 0) or e (u < 0), and z·σ = u·m / (k·d). The kernel folds
/// k into each channel's scale and shift once, so that no value pays a multiply for its exponent.
struct ScaledSwish {
  float k;       ///< β·log2(e)
  bool applies;  ///< |β| in [2^-4, 2^16]: u keeps z's precision, k²·d0·d1·d2·d3 its range

  HIPGRAD_DEVICE static ScaledSwish of(float beta) {
    const float magnitude = fabsf(beta);
    return {beta * kLog2E, magnitude >= 0x1p-4f && magnitude <= 0x1p16f};
  }

  /// Whether every u = k·z of a channel stays finite where z is: |z − β_c| ≤ |γ_c|·√n, since each
  /// |x − μ|·rstd ≤ √n over a group of n values; the 2^20 covers the statistics' rounding. A
  /// non-finite γ or β fails it (the unscaled path gives those their NaN or infinity).
  HIPGRAD_DEVICE bool keeps_finite(float gamma, float beta, float root_count) const {
    return (fabsf(gamma) * root_count * 0x1p20f + fabsf(beta)) * fabsf(k) < 0x1p120f;
  }
};

/// z·σ(β·z) of R = 1, 2 or 4 values of one channel, given as u = k·z (ScaledSwish), in place.
/// Each needs 1/(k·d); the R values share one reciprocal, and no d is formed on its own: k·d0 =
/// k·e0 + k, k·d0·d1 = e1·(k·d0) + k·d0, and from r = 1/(k·d0·d1), 1/(k·d0) = e1·r + r, each a
/// fused multiply-add. Each d lies in [1, 2], so that k²·d0·d1·d2·d3 keeps its range for the k
/// that ScaledSwish::applies to. A NaN reaches the others through the shared reciprocal, so all R
/// values must be of one channel (see fast_swish_pair).
template <int R>
HIPGRAD_DEVICE HIPGRAD_INLINE void fast_scaled_swish(float (&u)[R], float k) {
  static_assert(R == 1 || R == 2 || R == 4, "one, two or four values share a reciprocal");
  float e[R], q[R];  // q[i] = 1 / (k·d[i])
  HIPGRAD_UNROLL
  for (int i = 0; i < R; ++i) e[i] = fast_exp2(-fabsf(u[i]));
  if constexpr (R == 1) {
    q[0] = fast_reciprocal(fmaf(k, e[0], k));
  } else {
    float pair_product[R / 2], pair_reciprocal[R / 2];  // k·d0·d1 of each pair, and 1 / it
    HIPGRAD_UNROLL
    for (int p = 0; p < R / 2; ++p) {
      const float scaled_d = fmaf(k, e[2 * p], k);
      pair_product[p] = fmaf(e[2 * p + 1], scaled_d, scaled_d);
    }
    if constexpr (R == 2) {
      pair_reciprocal[0] = fast_reciprocal(pair_product[0]);
    } else {
      const float r = fast_reciprocal(pair_product[0] * pair_product[1]);  // 1 / (k²·d0·d1·d2·d3)
      pair_reciprocal[0] = r * pair_product[1];
      pair_reciprocal[1] = r * pair_product[0];
    }
    HIPGRAD_UNROLL
    for (int p = 0; p < R / 2; ++p) {
      q[2 * p] = fmaf(pair_reciprocal[p], e[2 * p + 1], pair_reciprocal[p]);
      q[2 * p + 1] = fmaf(pair_reciprocal[p], e[2 * p], pair_reciprocal[p]);
    }
  }
  HIPGRAD_UNROLL
  for (int i = 0; i < R; ++i) u[i] = (u[i] >= 0.0f ? u[i] : u[i] * e[i]) * q[i];
}

}  // namespace hipgrad::groupnorm::detail
