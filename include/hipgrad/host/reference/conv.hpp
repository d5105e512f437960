/// @file conv.hpp
/// @brief CPU references of grouped N-D convolution: forward, backward-data and backward-weight.
///
/// Tensors have the logical lengths of conv::ConvParams (in [G, N, C, spatial...], wei
/// [G, K, C, filter...], out [G, N, K, spatial...]) and any strides. Sums are accumulated in
/// double. Every result element is computed by one sequential loop in one thread, so results are
/// bitwise the same for any thread count and any layout, and every element is written (padding
/// gaps of a strided result are left alone).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/host/parallel.hpp"
#include "hipgrad/host/tensor.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::host::reference {

namespace conv_detail {

template <std::size_t R>
using Coord = std::array<Index, R>;

/// The positions base + j·step (per dimension, step > 0) for j in the box [lo, hi): the j in
/// [0, count) whose position lies inside [0, limit). Forward walks filter taps this way (step =
/// dilation), backward-weight walks output positions (step = stride).
template <std::size_t R>
struct Window {
  Coord<R> base, step, lo, hi;

  Coord<R> position(const Coord<R>& j) const {
    Coord<R> x{};
    for (std::size_t d = 0; d < R; ++d) x[d] = base[d] + j[d] * step[d];
    return x;
  }
};

template <std::size_t R>
Window<R> window_in_bounds(const Coord<R>& base, const Coord<R>& step, const Coord<R>& limit, const Coord<R>& count) {
  Window<R> w{base, step, {}, {}};
  for (std::size_t d = 0; d < R; ++d) {
    const Index first = -conv::detail::floor_div(base[d], step[d]);  // ⌈−base / step⌉
    const Index last = conv::detail::floor_div(limit[d] - 1 - base[d], step[d]);
    w.lo[d] = first > 0 ? first : 0;
    w.hi[d] = last + 1 < count[d] ? last + 1 : count[d];
  }
  return w;
}

/// Calls f(coord) for every coord of the box [lo, hi), last dimension fastest.
template <std::size_t R, typename F>
void for_each_in_box(const Coord<R>& lo, const Coord<R>& hi, F&& f) {
  for (std::size_t d = 0; d < R; ++d) {
    if (lo[d] >= hi[d]) return;
  }
  Coord<R> c = lo;
  for (;;) {
    f(static_cast<const Coord<R>&>(c));
    std::size_t d = R;
    for (; d > 0; --d) {
      if (++c[d - 1] < hi[d - 1]) break;
      c[d - 1] = lo[d - 1];
    }
    if (d == 0) return;
  }
}

/// Storage offsets of a conv tensor [A, B, C, spatial...] (any of in/wei/out).
template <int NDim>
class Addressing {
 public:
  explicit Addressing(const std::vector<Index>& strides) {
    for (int d = 0; d < NDim + 3; ++d) strides_[d] = strides[static_cast<std::size_t>(d)];
  }
  Index operator()(Index a, Index b, Index c, const Coord<NDim>& spatial) const {
    Index o = a * strides_[0] + b * strides_[1] + c * strides_[2];
    for (int d = 0; d < NDim; ++d) o += spatial[d] * strides_[3 + d];
    return o;
  }
  Index stride(int dim) const { return strides_[dim]; }

 private:
  Coord<NDim + 3> strides_{};
};

template <typename T>
Status check_lengths(const char* name, const Tensor<T>& t, const std::vector<Index>& expected) {
  if (t.lengths() == expected) return Status::ok();
  return Status::invalid_argument(std::string(name) + " has lengths " + lengths_to_string(t.lengths()) +
                                  " but the problem needs " + lengths_to_string(expected));
}

/// Writes result(a, b, c, spatial) = body(a, b, c, spatial) for every element, in parallel.
template <int NDim, typename T, typename Body>
void compute_each_element(Tensor<T>& result, Body body) {
  Coord<NDim + 3> lengths{};
  for (int d = 0; d < NDim + 3; ++d) lengths[d] = result.length(d);
  const Addressing<NDim> address(result.strides());
  T* data = result.data();
  parallel_for(0, result.num_elements(), [&](Index flat) {
    Coord<NDim + 3> index{};
    for (int d = NDim + 2; d >= 0; --d) {
      index[d] = flat % lengths[d];
      flat /= lengths[d];
    }
    Coord<NDim> spatial{};
    for (int d = 0; d < NDim; ++d) spatial[d] = index[3 + d];
    data[address(index[0], index[1], index[2], spatial)] =
        type_convert<T>(body(index[0], index[1], index[2], static_cast<const Coord<NDim>&>(spatial)));
  });
}

template <typename T>
double load(const T* data, Index offset) {
  return type_convert<double>(data[offset]);
}

}  // namespace conv_detail

/// out[g, n, k, o] = Σ_{c, f} in[g, n, c, o·stride + f·dilation − left_pad] · wei[g, k, c, f], taps
/// that land in the padding contributing zero.
template <int NDim, typename TIn, typename TWei, typename TOut>
Status conv_forward(const Tensor<TIn>& in, const Tensor<TWei>& wei, Tensor<TOut>& out,
                    const conv::ConvParams<NDim>& p) {
  using conv_detail::Coord;
  HIPGRAD_RETURN_IF_ERROR(p.validate());
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("input", in, p.input_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("weight", wei, p.weight_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("output", out, p.output_lengths()));
  const conv_detail::Addressing<NDim> in_at(in.strides()), wei_at(wei.strides());
  conv_detail::compute_each_element<NDim>(out, [&](Index g, Index n, Index k, const Coord<NDim>& o) {
    Coord<NDim> base{};
    for (int d = 0; d < NDim; ++d) base[d] = o[d] * p.strides[d] - p.left_pads[d];
    const auto taps = conv_detail::window_in_bounds<NDim>(base, p.dilations, p.input, p.filter);
    double sum = 0.0;
    conv_detail::for_each_in_box<NDim>(taps.lo, taps.hi, [&](const Coord<NDim>& f) {
      const Index in_offset = in_at(g, n, 0, taps.position(f)), wei_offset = wei_at(g, k, 0, f);
      for (Index c = 0; c < p.C; ++c) {
        sum += conv_detail::load(in.data(), in_offset + c * in_at.stride(2)) *
               conv_detail::load(wei.data(), wei_offset + c * wei_at.stride(2));
      }
    });
    return sum;
  });
  return Status::ok();
}

/// din[g, n, c, x] = Σ dout[g, n, k, o] · wei[g, k, c, f] over k and the taps f for which
/// x + left_pad − f·dilation = o·stride with o inside the output: the adjoint of conv_forward.
template <int NDim, typename TIn, typename TWei, typename TOut>
Status conv_backward_data(const Tensor<TOut>& dout, const Tensor<TWei>& wei, Tensor<TIn>& din,
                          const conv::ConvParams<NDim>& p) {
  using conv_detail::Coord;
  HIPGRAD_RETURN_IF_ERROR(p.validate());
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("output gradient", dout, p.output_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("weight", wei, p.weight_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("input gradient", din, p.input_lengths()));
  const conv_detail::Addressing<NDim> dout_at(dout.strides()), wei_at(wei.strides());
  const Coord<NDim> out_lengths = p.output_spatial();
  conv_detail::compute_each_element<NDim>(din, [&](Index g, Index n, Index c, const Coord<NDim>& x) {
    double sum = 0.0;
    conv_detail::for_each_in_box<NDim>(Coord<NDim>{}, p.filter, [&](const Coord<NDim>& f) {
      Coord<NDim> o{};
      for (int d = 0; d < NDim; ++d) {
        const Index t = x[d] + p.left_pads[d] - f[d] * p.dilations[d];
        if (t < 0 || t % p.strides[d] != 0 || t / p.strides[d] >= out_lengths[d]) return;
        o[d] = t / p.strides[d];
      }
      const Index dout_offset = dout_at(g, n, 0, o), wei_offset = wei_at(g, 0, c, f);
      for (Index k = 0; k < p.K; ++k) {
        sum += conv_detail::load(dout.data(), dout_offset + k * dout_at.stride(2)) *
               conv_detail::load(wei.data(), wei_offset + k * wei_at.stride(1));
      }
    });
    return sum;
  });
  return Status::ok();
}

/// dwei[g, k, c, f] = Σ_{n, o} in[g, n, c, o·stride + f·dilation − left_pad] · dout[g, n, k, o] over
/// the outputs whose tap f lands inside the input.
template <int NDim, typename TIn, typename TWei, typename TOut>
Status conv_backward_weight(const Tensor<TIn>& in, const Tensor<TOut>& dout, Tensor<TWei>& dwei,
                            const conv::ConvParams<NDim>& p) {
  using conv_detail::Coord;
  HIPGRAD_RETURN_IF_ERROR(p.validate());
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("input", in, p.input_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("output gradient", dout, p.output_lengths()));
  HIPGRAD_RETURN_IF_ERROR(conv_detail::check_lengths("weight gradient", dwei, p.weight_lengths()));
  const conv_detail::Addressing<NDim> in_at(in.strides()), dout_at(dout.strides());
  const Coord<NDim> out_lengths = p.output_spatial();
  conv_detail::compute_each_element<NDim>(dwei, [&](Index g, Index k, Index c, const Coord<NDim>& f) {
    Coord<NDim> base{};
    for (int d = 0; d < NDim; ++d) base[d] = f[d] * p.dilations[d] - p.left_pads[d];
    const auto outputs = conv_detail::window_in_bounds<NDim>(base, p.strides, p.input, out_lengths);
    double sum = 0.0;
    for (Index n = 0; n < p.N; ++n) {
      conv_detail::for_each_in_box<NDim>(outputs.lo, outputs.hi, [&](const Coord<NDim>& o) {
        sum += conv_detail::load(in.data(), in_at(g, n, c, outputs.position(o))) *
               conv_detail::load(dout.data(), dout_at(g, n, k, o));
      });
    }
    return sum;
  });
  return Status::ok();
}

}  // namespace hipgrad::host::reference
