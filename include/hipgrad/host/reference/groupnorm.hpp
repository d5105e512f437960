/// @file groupnorm.hpp
/// @brief CPU references of GroupNorm (optionally followed by Swish): forward, backward-data and
///        backward-γ/β.
///
/// x, y, dy and dx have logical lengths [N, C, spatial...] (0 to 3 spatial dimensions) and any
/// strides, each its own; γ, β, dγ, dβ are [C]; the saved statistics mean and rstd are float
/// [N, G]. Everything is computed in double. Each output element (or each (n, g) group of them)
/// is produced by one fixed sequential loop, so results are bitwise independent of the thread
/// count and of the layouts.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/host/parallel.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"

namespace hipgrad::host::reference {

namespace groupnorm_detail {

/// Sizes of a GroupNorm problem, taken from x and the group count.
struct Shape {
  Index n = 0, c = 0, groups = 0, spatial = 1;
  Index channels_per_group() const { return c / groups; }
  Index group_size() const { return channels_per_group() * spatial; }
};

/// Storage offset of element (n, c, s) of an [N, C, spatial...] tensor, s the row-major flat
/// spatial index; the spatial offsets are tabulated once since every pass visits them all.
class Addressing {
 public:
  template <typename T>
  explicit Addressing(const Tensor<T>& t) : n_stride_(t.stride(0)), c_stride_(t.stride(1)), spatial_(1, 0) {
    for (int d = 2; d < t.rank(); ++d) {
      std::vector<Index> next;
      next.reserve(spatial_.size() * static_cast<std::size_t>(t.length(d)));
      for (Index outer : spatial_) {
        for (Index i = 0; i < t.length(d); ++i) next.push_back(outer + i * t.stride(d));
      }
      spatial_.swap(next);
    }
  }
  Index operator()(Index n, Index c, Index s) const {
    return n * n_stride_ + c * c_stride_ + spatial_[static_cast<std::size_t>(s)];
  }

 private:
  Index n_stride_, c_stride_;
  std::vector<Index> spatial_;
};

template <typename T>
double load(const Tensor<T>& t, Index offset) {
  return type_convert<double>(t.data()[offset]);
}

template <typename T>
Status check_lengths(const char* name, const Tensor<T>& t, const std::vector<Index>& expected) {
  if (t.lengths() == expected) return Status::ok();
  return Status::invalid_argument(std::string(name) + " has lengths " + lengths_to_string(t.lengths()) + ", expected " +
                                  lengths_to_string(expected));
}

/// Checks x's rank and lengths and the group count, and fills `shape`.
template <typename T>
Status make_shape(const Tensor<T>& x, Index groups, Shape& shape) {
  if (x.rank() < 2 || x.rank() > 5) {
    return Status::invalid_argument("x must have rank 2 to 5 ([N, C, spatial...]), got rank " +
                                    std::to_string(x.rank()));
  }
  for (int d = 0; d < x.rank(); ++d) {
    if (x.length(d) <= 0)
      return Status::invalid_argument("x length " + std::to_string(x.length(d)) + " in dimension " + std::to_string(d) +
                                      " must be positive");
  }
  if (groups <= 0) return Status::invalid_argument("G must be positive, got " + std::to_string(groups));
  if (x.length(1) % groups != 0) {
    return Status::invalid_argument("C=" + std::to_string(x.length(1)) +
                                    " is not divisible by G=" + std::to_string(groups));
  }
  shape.n = x.length(0);
  shape.c = x.length(1);
  shape.groups = groups;
  shape.spatial = x.num_elements() / (shape.n * shape.c);
  return Status::ok();
}

/// Checks everything but x and the group count (see make_shape): γ/β and the statistics.
template <typename TP>
Status check_parameters(const Shape& shape, const Tensor<TP>& gamma, const Tensor<TP>& beta, const Tensor<float>& mean,
                        const Tensor<float>& rstd) {
  HIPGRAD_RETURN_IF_ERROR(check_lengths("gamma", gamma, {shape.c}));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("beta", beta, {shape.c}));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("mean", mean, {shape.n, shape.groups}));
  return check_lengths("rstd", rstd, {shape.n, shape.groups});
}

template <typename T, typename TP>
Status check_backward(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<TP>& gamma, const Tensor<TP>& beta,
                      const Tensor<float>& mean, const Tensor<float>& rstd, Index groups, Shape& shape) {
  HIPGRAD_RETURN_IF_ERROR(make_shape(x, groups, shape));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("dy", dy, x.lengths()));
  return check_parameters(shape, gamma, beta, mean, rstd);
}

/// x̂ = (x − μ)·rstd of one element and dz, the gradient with respect to the activation's input.
struct BackwardElement {
  double x_hat, dz;
};

/// What both backward passes read, in double; construct only after check_backward() passed.
template <typename T, typename TP>
class BackwardView {
 public:
  BackwardView(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<TP>& gamma, const Tensor<TP>& beta,
               const Tensor<float>& mean, const Tensor<float>& rstd, groupnorm::Activation activation,
               double swish_beta)
      : dy_(dy),
        x_(x),
        gamma_(gamma),
        beta_(beta),
        mean_(mean),
        rstd_(rstd),
        activation_(activation),
        swish_beta_(swish_beta),
        dy_at_(dy),
        x_at_(x) {}

  double gamma(Index c) const { return load(gamma_, c * gamma_.stride(0)); }
  double rstd(Index n, Index g) const { return rstd_.at(n, g); }

  /// Element (n, c, s) of group g. For Swish, z is recomputed from the saved statistics.
  BackwardElement element(Index n, Index c, Index s, Index g) const {
    const double x_hat = (load(x_, x_at_(n, c, s)) - mean_.at(n, g)) * rstd(n, g);
    double dz = load(dy_, dy_at_(n, c, s));
    if (activation_ == groupnorm::Activation::kSwish) {
      const double z = gamma(c) * x_hat + load(beta_, c * beta_.stride(0));
      dz *= groupnorm::swish_derivative(z, swish_beta_);
    }
    return {x_hat, dz};
  }

 private:
  const Tensor<T>& dy_;
  const Tensor<T>& x_;
  const Tensor<TP>& gamma_;
  const Tensor<TP>& beta_;
  const Tensor<float>& mean_;
  const Tensor<float>& rstd_;
  groupnorm::Activation activation_;
  double swish_beta_;
  Addressing dy_at_, x_at_;
};

}  // namespace groupnorm_detail

/// y = act(γ_c·(x − μ)·rstd + β_c) with μ and the population variance σ² of each (n, g) group
/// (two passes in double) and rstd = 1/√(σ² + ε); y uses the double statistics, mean and rstd
/// receive them rounded to float.
template <typename T, typename TP>
Status groupnorm_forward(const Tensor<T>& x, const Tensor<TP>& gamma, const Tensor<TP>& beta, Index groups,
                         double epsilon, groupnorm::Activation activation, double swish_beta, Tensor<T>& y,
                         Tensor<float>& mean, Tensor<float>& rstd) {
  using namespace groupnorm_detail;
  Shape shape;
  HIPGRAD_RETURN_IF_ERROR(make_shape(x, groups, shape));
  if (!(epsilon > 0.0)) return Status::invalid_argument("epsilon must be positive, got " + std::to_string(epsilon));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("y", y, x.lengths()));
  HIPGRAD_RETURN_IF_ERROR(check_parameters(shape, gamma, beta, mean, rstd));
  const Addressing x_at(x), y_at(y);
  const Index cpg = shape.channels_per_group();
  parallel_for(0, shape.n * shape.groups, [&](Index ng) {
    const Index n = ng / shape.groups, g = ng % shape.groups;
    double sum = 0.0, squares = 0.0;
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
      for (Index s = 0; s < shape.spatial; ++s) sum += load(x, x_at(n, c, s));
    }
    const double mu = sum / static_cast<double>(shape.group_size());
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
      for (Index s = 0; s < shape.spatial; ++s) {
        const double centered = load(x, x_at(n, c, s)) - mu;
        squares += centered * centered;
      }
    }
    const double r = 1.0 / std::sqrt(squares / static_cast<double>(shape.group_size()) + epsilon);
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
      const double gamma_c = load(gamma, c * gamma.stride(0)), beta_c = load(beta, c * beta.stride(0));
      for (Index s = 0; s < shape.spatial; ++s) {
        const double z = gamma_c * ((load(x, x_at(n, c, s)) - mu) * r) + beta_c;
        const double out = activation == groupnorm::Activation::kSwish ? groupnorm::swish(z, swish_beta) : z;
        y.data()[y_at(n, c, s)] = type_convert<T>(out);
      }
    }
    mean.at(n, g) = static_cast<float>(mu);
    rstd.at(n, g) = static_cast<float>(r);
  });
  return Status::ok();
}

/// dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) with g = dz·γ_c and the means over the (n, g) group,
/// using the saved mean and rstd; for Swish, dz = dy·swish'(z) with z recomputed from them.
template <typename T, typename TP>
Status groupnorm_backward_data(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<TP>& gamma, const Tensor<TP>& beta,
                               const Tensor<float>& mean, const Tensor<float>& rstd, Index groups,
                               groupnorm::Activation activation, double swish_beta, Tensor<T>& dx) {
  using namespace groupnorm_detail;
  Shape shape;
  HIPGRAD_RETURN_IF_ERROR(check_backward(dy, x, gamma, beta, mean, rstd, groups, shape));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("dx", dx, x.lengths()));
  const BackwardView<T, TP> view(dy, x, gamma, beta, mean, rstd, activation, swish_beta);
  const Addressing dx_at(dx);
  const Index cpg = shape.channels_per_group();
  parallel_for(0, shape.n * shape.groups, [&](Index ng) {
    const Index n = ng / shape.groups, g = ng % shape.groups;
    double sum_g = 0.0, sum_g_x_hat = 0.0;
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
      for (Index s = 0; s < shape.spatial; ++s) {
        const BackwardElement e = view.element(n, c, s, g);
        sum_g += e.dz * view.gamma(c);
        sum_g_x_hat += e.dz * view.gamma(c) * e.x_hat;
      }
    }
    const double mean_g = sum_g / static_cast<double>(shape.group_size());
    const double mean_g_x_hat = sum_g_x_hat / static_cast<double>(shape.group_size());
    for (Index c = g * cpg; c < (g + 1) * cpg; ++c) {
      for (Index s = 0; s < shape.spatial; ++s) {
        const BackwardElement e = view.element(n, c, s, g);
        const double value = view.rstd(n, g) * (e.dz * view.gamma(c) - mean_g - e.x_hat * mean_g_x_hat);
        dx.data()[dx_at(n, c, s)] = type_convert<T>(value);
      }
    }
  });
  return Status::ok();
}

/// dγ_c = Σ_{n, spatial} dz·x̂ and dβ_c = Σ_{n, spatial} dz, with x̂ from the saved statistics.
template <typename T, typename TP>
Status groupnorm_backward_gamma_beta(const Tensor<T>& dy, const Tensor<T>& x, const Tensor<TP>& gamma,
                                     const Tensor<TP>& beta, const Tensor<float>& mean, const Tensor<float>& rstd,
                                     Index groups, groupnorm::Activation activation, double swish_beta,
                                     Tensor<TP>& dgamma, Tensor<TP>& dbeta) {
  using namespace groupnorm_detail;
  Shape shape;
  HIPGRAD_RETURN_IF_ERROR(check_backward(dy, x, gamma, beta, mean, rstd, groups, shape));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("dgamma", dgamma, {shape.c}));
  HIPGRAD_RETURN_IF_ERROR(check_lengths("dbeta", dbeta, {shape.c}));
  const BackwardView<T, TP> view(dy, x, gamma, beta, mean, rstd, activation, swish_beta);
  parallel_for(0, shape.c, [&](Index c) {
    const Index g = c / shape.channels_per_group();
    double sum_dz = 0.0, sum_dz_x_hat = 0.0;
    for (Index n = 0; n < shape.n; ++n) {
      for (Index s = 0; s < shape.spatial; ++s) {
        const BackwardElement e = view.element(n, c, s, g);
        sum_dz += e.dz;
        sum_dz_x_hat += e.dz * e.x_hat;
      }
    }
    dgamma.data()[c * dgamma.stride(0)] = type_convert<TP>(sum_dz_x_hat);
    dbeta.data()[c * dbeta.stride(0)] = type_convert<TP>(sum_dz);
  });
  return Status::ok();
}

}  // namespace hipgrad::host::reference
