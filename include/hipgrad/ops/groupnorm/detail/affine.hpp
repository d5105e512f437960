/// @file affine.hpp
/// @brief The forward's affine step z = γ·rstd·(x − μ) + β of one (n, c), its output before the
///        activation, in the form that keeps the data type's precision.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/numeric_types.hpp"

namespace hipgrad::groupnorm::detail {

/// The affine step of one (n, c), z = γ·rstd·(x − μ) + β, held as z = scale·(x − center) + shift.
///
/// fp32 data take it centred (center = μ, shift = β): x − μ is exact where x lies near μ, so z
/// keeps fp32's relative precision however large |μ|·rstd is (a mean many σ from 0, or a variance
/// far below ε, where a group of one value gives z = β exactly). The folded form, z = scale·x +
/// (β − μ·scale), rounds at the magnitude of |μ|·scale and so loses log2(|μ|·rstd) bits of z.
///
/// 16-bit data take the folded form, an instruction per value fewer for the loops bound by their
/// instruction issue (the 16-bit staged forward + Swish). Its loss,
/// about 2^-23·|μ|·rstd of |z|, stays below the rounding of a 16-bit output (2^-11 of |z| in fp16,
/// 2^-8 in bf16) while |μ|·rstd < 2^12 (fp16) or 2^15 (bf16); only groups whose σ and √ε both
/// lie far below |μ|·2^-12 exceed it, by a few ulp.
struct Affine {
  float scale, center, shift;
};

template <typename T>
inline constexpr bool kCenteredAffine = !is_16bit_float_v<T>;

/// The folded form, center 0 and shift = β − μ·scale, from scale = γ·rstd, the group's mean and β.
/// The backward's recomputed pre-activation (Swish only) takes it for every data type: z reaches
/// dz only through σ and its derivative, whose relative error follows z's, and the centred form
/// measured slower in the fp32 staged backward + Swish.
HIPGRAD_DEVICE HIPGRAD_INLINE Affine folded_affine(float scale, float mean, float beta) {
  return Affine{scale, 0.0f, beta - mean * scale};
}

/// z under a folded Affine (folded_affine, or scaled_folded of one).
HIPGRAD_DEVICE HIPGRAD_INLINE float folded_z(const Affine& a, float x) { return a.scale * x + a.shift; }

/// k·z under the folded Affine `a`: both terms times k (a centred one would keep its center).
HIPGRAD_DEVICE HIPGRAD_INLINE Affine scaled_folded(const Affine& a, float k) {
  return Affine{a.scale * k, 0.0f, a.shift * k};
}

/// The Affine that data of type T evaluate, from scale = γ·rstd, the group's mean and β.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE Affine make_affine(float scale, float mean, float beta) {
  if constexpr (kCenteredAffine<T>)
    return Affine{scale, mean, beta};
  else
    return folded_affine(scale, mean, beta);
}

/// z of a value of type T (converted to float) under make_affine<T>'s Affine.
template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE float affine_z(const Affine& a, float x) {
  if constexpr (kCenteredAffine<T>)
    return a.scale * (x - a.center) + a.shift;
  else
    return folded_z(a, x);
}

}  // namespace hipgrad::groupnorm::detail
