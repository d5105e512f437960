/// @file activation.hpp
/// @brief The activation a GroupNorm may fuse after the affine step, and Swish with its derivative.
///
/// Shared by the kernels (float) and the CPU reference (double), so that both evaluate the same
/// formulas. Swish(z) = z·σ(β·z); β = 1 is SiLU.
#pragma once

#include <cmath>

#include "hipgrad/core/config.hpp"

namespace hipgrad::groupnorm {

enum class Activation { kIdentity, kSwish };

inline const char* activation_name(Activation activation) {
  return activation == Activation::kSwish ? "swish" : "identity";
}

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float swish(float z, float beta) { return z * sigmoid(beta * z); }
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE double swish(double z, double beta) { return z * sigmoid(beta * z); }

/// d/dz of z·σ(βz) = σ(βz) + β·z·σ(βz)·(1 − σ(βz)).
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float swish_derivative(float z, float beta) {
  const float s = sigmoid(beta * z);
  return s + beta * z * s * (1.0f - s);
}
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE double swish_derivative(double z, double beta) {
  const double s = sigmoid(beta * z);
  return s + beta * z * s * (1.0 - s);
}

}  // namespace hipgrad::groupnorm
