/// @file groupnorm_tolerance.hpp
/// @brief The tolerances a GroupNorm result is checked with, from the magnitudes of the terms
///        each output is made of (host/check.hpp explains the two kinds of bound).
///
/// y, dx, mean and rstd are averages, or elementwise functions of averages: their bound does not
/// grow with the group size (averaged_tolerance), scaled by the largest term that enters them, so
/// that a result that cancels to near zero is still judged against the size of what cancelled.
/// dγ and dβ are sums over N·spatial (sum_tolerance). Swish's derivative lies in [−0.1, 1.1] for
/// any β, which bounds dz = dy·act'(z) by 1.1·|dy|.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "hipgrad/core/status.hpp"
#include "hipgrad/host/check.hpp"
#include "hipgrad/host/parallel.hpp"
#include "hipgrad/host/reference/groupnorm.hpp"
#include "hipgrad/host/tensor.hpp"

namespace hipgrad::host::reference {

struct GroupNormTolerances {
  Tolerance y, mean, rstd;      ///< the forward's outputs
  Tolerance dx, dgamma, dbeta;  ///< the backward's (set only when dy was given)
};

namespace groupnorm_detail {

/// The largest |dz| / |dy| of any activation (Swish's derivative is at most 1.0998).
inline constexpr double kActivationSlope = 1.1;

/// The largest terms of one (n, g) group's outputs (see groupnorm_tolerances).
struct TermSizes {
  double y = 0, x = 0, rstd = 0, dx = 0, dy = 0, dy_x_hat = 0;
  void take_max(const TermSizes& o) {
    y = std::max(y, o.y), x = std::max(x, o.x), rstd = std::max(rstd, o.rstd), dx = std::max(dx, o.dx);
    dy = std::max(dy, o.dy), dy_x_hat = std::max(dy_x_hat, o.dy_x_hat);
  }
};

template <typename T, typename TP>
TermSizes group_term_sizes(const Tensor<T>& x, const Tensor<T>* dy, const Tensor<TP>& gamma, const Tensor<TP>& beta,
                           const Tensor<float>& mean, const Tensor<float>& rstd, const Shape& shape,
                           const Addressing& x_at, const Addressing& dy_at, Index n, Index g) {
  const Index cpg = shape.channels_per_group();
  const double mu = mean.at(n, g), r = rstd.at(n, g), count = static_cast<double>(shape.group_size());
  const auto x_hat = [&](Index c, Index s) { return (load(x, x_at(n, c, s)) - mu) * r; };
  const auto gamma_dy = [&](Index c, Index s) {
    return std::fabs(load(gamma, c * gamma.stride(0)) * load(*dy, dy_at(n, c, s)));
  };
  // The dx correction terms' sizes: the group's means of |γ·dy| and |γ·dy·x̂|.
  double a = 0, b = 0;
  if (dy)
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c)
      for (Index s = 0; s < shape.spatial; ++s) {
        a += gamma_dy(c, s) / count;
        b += gamma_dy(c, s) * std::fabs(x_hat(c, s)) / count;
      }
  TermSizes t;
  t.rstd = std::fabs(r);
  for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
    const double gamma_c = std::fabs(load(gamma, c * gamma.stride(0))),
                 beta_c = std::fabs(load(beta, c * beta.stride(0)));
    for (Index s = 0; s < shape.spatial; ++s) {
      const double xh = std::fabs(x_hat(c, s)), xv = std::fabs(load(x, x_at(n, c, s)));
      t.x = std::max(t.x, xv);
      t.y = std::max(t.y, gamma_c * (xh + std::fabs(r) * xv) + beta_c);
      if (!dy) continue;
      const double d = std::fabs(load(*dy, dy_at(n, c, s)));
      t.dy = std::max(t.dy, d);
      t.dy_x_hat = std::max(t.dy_x_hat, d * xh);
      t.dx = std::max(t.dx, std::fabs(r) * (gamma_c * d + a + xh * b));
    }
  }
  return t;
}

}  // namespace groupnorm_detail

/// The tolerances for a GroupNorm problem's outputs stored as T (data) and TP (γ/β), from its
/// inputs and the statistics the backward is given (`dy` may be null for a forward):
///  * y = γ·rstd·(x − μ) + β: terms up to max |γ|·(|x̂| + rstd·|x|) + |β| (μ, an average of
///    values of size |x|, carries an error at that size, which rstd·γ scales);
///  * mean: terms up to max |x|; rstd: relative (its terms are all positive), scaled by max rstd;
///  * dx = rstd·(γ·dz − mean(γ·dz) − x̂·mean(γ·dz·x̂)): terms up to the largest, over the
///    elements, of 1.1·rstd·(|γ·dy| + mean|γ·dy| + |x̂|·mean|γ·dy·x̂|);
///  * dγ = Σ dz·x̂ and dβ = Σ dz over N·spatial terms of size up to 1.1·max|dy·x̂| and 1.1·max|dy|.
template <typename T, typename TP>
Status groupnorm_tolerances(const Tensor<T>& x, const Tensor<T>* dy, const Tensor<TP>& gamma, const Tensor<TP>& beta,
                            const Tensor<float>& mean, const Tensor<float>& rstd, Index groups,
                            GroupNormTolerances* out) {
  using namespace groupnorm_detail;
  if (!out) return Status::invalid_argument("groupnorm_tolerances: the output must not be null");
  Shape shape;
  HIPGRAD_RETURN_IF_ERROR(make_shape(x, groups, shape));
  HIPGRAD_RETURN_IF_ERROR(check_parameters(shape, gamma, beta, mean, rstd));
  if (dy) HIPGRAD_RETURN_IF_ERROR(check_lengths("dy", *dy, x.lengths()));
  const Addressing x_at(x), dy_at(dy ? *dy : x);
  std::vector<TermSizes> groups_sizes(static_cast<std::size_t>(shape.n * shape.groups));
  parallel_for(0, shape.n * shape.groups, [&](Index ng) {
    groups_sizes[static_cast<std::size_t>(ng)] =
        group_term_sizes(x, dy, gamma, beta, mean, rstd, shape, x_at, dy_at, ng / shape.groups, ng % shape.groups);
  });
  TermSizes t;
  for (const TermSizes& g : groups_sizes) t.take_max(g);
  out->y = averaged_tolerance<T>(t.y);
  out->mean = averaged_tolerance<float>(t.x);
  out->rstd = averaged_tolerance<float>(t.rstd);
  const Index per_channel = shape.n * shape.spatial;
  out->dx = averaged_tolerance<T>(kActivationSlope * t.dx);
  out->dgamma = sum_tolerance<TP>(per_channel, kActivationSlope * t.dy_x_hat);
  out->dbeta = sum_tolerance<TP>(per_channel, kActivationSlope * t.dy);
  return Status::ok();
}

}  // namespace hipgrad::host::reference
