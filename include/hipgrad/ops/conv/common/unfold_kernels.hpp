/// @file unfold_kernels.hpp
/// @brief Device: the copies of the unfolded route (unfold.hpp) and their host launches —
///        x's windows into the columns matrix (im2col), the columns of Y folded back into dx
///        (col2im, one thread's sum per dx element), and the map of a weight between its strides
///        and its [G, K, columns] form (mapped_copy.hpp copies through it).
#pragma once

#include <algorithm>
#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/common/mapped_copy.hpp"

namespace hipgrad::conv::detail {

/// The geometry every unfolded copy shares. Column q of a (n, o..., g) row is tap q / C, channel
/// q % C (taps in the filter's order, the last dimension fastest); columns q ≥ taps · C are zero.
template <int NDim>
struct UnfoldGeometry {
  int groups = 1, channels = 1, taps = 1;
  int row_columns = 0;  ///< the columns matrix's row length: taps · C rounded up to 16 bytes
  int output[NDim] = {}, input[NDim] = {}, filter[NDim] = {};
  int stride[NDim] = {}, dilation[NDim] = {}, left_pad[NDim] = {};
  std::int64_t strides[3 + NDim] = {};  ///< the activation's (x or dx) [G, N, C, spatial...]
};

/// x [G, N, C, input...] → columns [N, output..., G, row_columns] (contiguous).
template <typename T, int NDim>
struct UnfoldParams {
  const T* x = nullptr;
  T* columns = nullptr;
  std::int64_t rows = 0;  ///< N · output... · G (below 2^31)
  int rows_per_pass = 1;  ///< rows a block of 256 threads covers at once
  UnfoldGeometry<NDim> geometry;
};

/// A columns row (n, o..., g): the x offset of its window's origin and the origin per dimension
/// (o · stride − left pad), 32-bit arithmetic (rows below 2^31).
template <int NDim>
struct UnfoldRow {
  std::int64_t base = 0;
  int origin[NDim] = {};
};
template <int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE UnfoldRow<NDim> unfold_row(const UnfoldGeometry<NDim>& u, std::uint32_t row) {
  UnfoldRow<NDim> r;
  const auto groups = static_cast<std::uint32_t>(u.groups);
  r.base = static_cast<std::int64_t>(row % groups) * u.strides[0];
  row /= groups;
  for (int d = NDim - 1; d >= 0; --d) {
    const auto extent = static_cast<std::uint32_t>(u.output[d]);
    r.origin[d] = static_cast<int>(row % extent) * u.stride[d] - u.left_pad[d];
    r.base += static_cast<std::int64_t>(r.origin[d]) * u.strides[3 + d];
    row /= extent;
  }
  r.base += static_cast<std::int64_t>(row) * u.strides[1];
  return r;
}

/// A column q < taps · C (tap q / C, channel q % C): its x offset from the row's base and its
/// reach past the origin per dimension (f · dilation).
template <int NDim>
struct UnfoldColumn {
  std::int64_t delta = 0;
  int reach[NDim] = {};
};
template <int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE UnfoldColumn<NDim> unfold_column(const UnfoldGeometry<NDim>& u, int q) {
  UnfoldColumn<NDim> c;
  int tap = q / u.channels;
  c.delta = static_cast<std::int64_t>(q % u.channels) * u.strides[2];
  for (int d = NDim - 1; d >= 0; --d) {
    c.reach[d] = (tap % u.filter[d]) * u.dilation[d];
    c.delta += static_cast<std::int64_t>(c.reach[d]) * u.strides[3 + d];
    tap /= u.filter[d];
  }
  return c;
}

/// The x offset of (row, column), or -1 where the window reads padding.
template <int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t unfold_at(const UnfoldGeometry<NDim>& u, const UnfoldRow<NDim>& r,
                                                          const UnfoldColumn<NDim>& c) {
  for (int d = 0; d < NDim; ++d) {
    const int at = r.origin[d] + c.reach[d];
    if (at < 0 || at >= u.input[d]) return -1;
  }
  return r.base + c.delta;
}

/// The x offset of columns element `i`, or -1 where it reads padding or a zero column.
template <int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t unfold_source(const UnfoldGeometry<NDim>& u, std::int64_t i) {
  const auto q = static_cast<int>(i % u.row_columns);
  if (q >= u.taps * u.channels) return -1;
  return unfold_at(u, unfold_row(u, static_cast<std::uint32_t>(i / u.row_columns)), unfold_column(u, q));
}

/// Each thread owns one 16-byte vector of columns (its columns' taps found once) and walks the
/// rows: a block covers rows_per_pass rows at a time, every columns element written (zeros for
/// padding and zero columns) with 16-byte stores.
template <typename T, int NDim>
__global__ void __launch_bounds__(256) unfold_kernel(const UnfoldParams<T, NDim> p) {
  constexpr int kVector = 16 / static_cast<int>(sizeof(T));
  const UnfoldGeometry<NDim>& u = p.geometry;
  const int vectors = u.row_columns / kVector;
  const int lane_row = static_cast<int>(threadIdx.x) / vectors,
            first = (static_cast<int>(threadIdx.x) % vectors) * kVector;
  if (lane_row >= p.rows_per_pass) return;
  UnfoldColumn<NDim> columns[kVector];
  bool used[kVector];
  for (int e = 0; e < kVector; ++e) {
    used[e] = first + e < u.taps * u.channels;
    if (used[e]) columns[e] = unfold_column(u, first + e);
  }
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * p.rows_per_pass;
  for (std::int64_t row = blockIdx.x * static_cast<std::int64_t>(p.rows_per_pass) + lane_row; row < p.rows;
       row += step) {
    const UnfoldRow<NDim> r = unfold_row(u, static_cast<std::uint32_t>(row));
    Vector<T, kVector> v;
    for (int e = 0; e < kVector; ++e) {
      const std::int64_t source = used[e] ? unfold_at(u, r, columns[e]) : -1;
      v[e] = source < 0 ? type_convert<T>(0.0f) : p.x[source];
    }
    store_vector(p.columns + row * u.row_columns + first, v);
  }
}

/// Y [N, output..., G, row_columns] (fp32) → dx [G, N, C, input...]: each dx element the sum of
/// the Y columns of the taps whose window meets it.
template <typename T, int NDim>
struct FoldParams {
  const float* y = nullptr;
  T* dx = nullptr;
  std::int64_t elements = 0;  ///< of dx (below 2^32)
  UnfoldGeometry<NDim> geometry;
  int tap_step[NDim] = {};  ///< stride / gcd(stride, dilation): the taps of one phase are this far apart
};

/// Adds to *sum, in the filter's order, the Y columns of the taps of dimensions D… that meet dx
/// position `at` (tap and row: the filter and output indices of dimensions before D).
template <int D, typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void fold_taps(const FoldParams<T, NDim>& p, const int* at, int tap,
                                                  std::int64_t row, std::int64_t column, float* sum) {
  const UnfoldGeometry<NDim>& u = p.geometry;
  const int reach = at[D] + u.left_pad[D];  // the output index times the stride, plus f · dilation
  int f = 0;
  while (f < p.tap_step[D] && (reach - f * u.dilation[D]) % u.stride[D] != 0) ++f;
  if (f == p.tap_step[D]) return;  // no tap of this dimension lands on an output position
  for (; f < u.filter[D]; f += p.tap_step[D]) {
    const int t = reach - f * u.dilation[D];
    if (t < 0) break;
    const int o = t / u.stride[D];
    if (o >= u.output[D]) continue;
    if constexpr (D + 1 == NDim) {
      *sum += p.y[((row * u.output[D] + o) * u.groups) * u.row_columns + column +
                  static_cast<std::int64_t>(tap * u.filter[D] + f) * u.channels];
    } else {
      fold_taps<D + 1>(p, at, tap * u.filter[D] + f, row * u.output[D] + o, column, sum);
    }
  }
}

/// The sum, in the filter's order, of the Y columns that meet dx element `i` (i in the order
/// [N, input..., G, C], C fastest); its dx offset in *offset.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float fold_sum(const FoldParams<T, NDim>& p, std::int64_t element,
                                                  std::int64_t* offset) {
  const UnfoldGeometry<NDim>& u = p.geometry;
  auto i = static_cast<std::uint32_t>(element);
  const int c = static_cast<int>(i % static_cast<std::uint32_t>(u.channels));
  i /= static_cast<std::uint32_t>(u.channels);
  const int g = static_cast<int>(i % static_cast<std::uint32_t>(u.groups));
  i /= static_cast<std::uint32_t>(u.groups);
  int at[NDim];
  *offset = static_cast<std::int64_t>(g) * u.strides[0] + static_cast<std::int64_t>(c) * u.strides[2];
  for (int d = NDim - 1; d >= 0; --d) {
    at[d] = static_cast<int>(i % static_cast<std::uint32_t>(u.input[d]));
    i /= static_cast<std::uint32_t>(u.input[d]);
    *offset += static_cast<std::int64_t>(at[d]) * u.strides[3 + d];
  }
  *offset += static_cast<std::int64_t>(i) * u.strides[1];
  // Y's column of (g, tap 0, c); row i is the sample n before the output dimensions join it.
  float sum = 0.0f;
  fold_taps<0>(p, at, 0, i, static_cast<std::int64_t>(g) * u.row_columns + c, &sum);
  return sum;
}

/// One thread per dx element: every element written once (zero where no tap meets it).
template <typename T, int NDim>
__global__ void __launch_bounds__(256) fold_kernel(const FoldParams<T, NDim> p) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < p.elements; i += step) {
    std::int64_t offset = 0;
    const float sum = fold_sum(p, i, &offset);
    p.dx[offset] = type_convert<T>(sum);
  }
}

/// A weight [G, K, C, filter...] at its strides and its columns form [G, K, row_columns]
/// (contiguous), for mapped_copy.hpp: spread w into the columns (zero columns past taps · C),
/// else the columns gathered back into dw.
template <typename T, int NDim>
struct WeightColumnsParams {
  const T* from = nullptr;
  T* to = nullptr;
  bool spread = true;
  std::int64_t elements = 0;  ///< of the columns form
  std::int64_t k = 1;         ///< rows per group of the columns form: (g, k), k fastest
  int k_used = 1;             ///< K: rows k ≥ K are zero
  int channels = 1, taps = 1, row_columns = 0;
  int filter[NDim] = {};
  std::int64_t strides[3 + NDim] = {};  ///< the weight's
};

/// The weight offset of columns element `i`, or -1 for a zero column.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t weight_columns_source(const WeightColumnsParams<T, NDim>& p,
                                                                      std::int64_t i) {
  const int q = static_cast<int>(i % p.row_columns);
  i /= p.row_columns;
  const std::int64_t k = i % p.k;
  if (q >= p.taps * p.channels || k >= p.k_used) return -1;
  int tap = q / p.channels;
  std::int64_t offset = (i / p.k) * p.strides[0] + k * p.strides[1] + (q % p.channels) * p.strides[2];
  for (int d = NDim - 1; d >= 0; --d) offset += (tap % p.filter[d]) * p.strides[3 + d], tap /= p.filter[d];
  return offset;
}

/// mapped_copy_kernel's map of the weight columns.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t mapped_offset(const WeightColumnsParams<T, NDim>& p, std::int64_t i) {
  return weight_columns_source(p, i);
}

/// dy [G, N, K, output...] at its strides → [rows, k_columns] (contiguous; one group), for
/// mapped_copy.hpp: the GEMMs' dy rows where dy is not channels-last in whole vectors.
template <typename T, int NDim>
struct DyRowsParams {
  const T* from = nullptr;
  T* to = nullptr;
  bool spread = true;
  std::int64_t elements = 0;  ///< rows · k_columns
  int k = 1, k_columns = 1;   ///< columns k ≥ K are zero
  int output[NDim] = {};
  std::int64_t strides[3 + NDim] = {};  ///< dy's
};

/// mapped_copy_kernel's map of dy's rows: the dy offset of packed element `i`, -1 past K.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::int64_t mapped_offset(const DyRowsParams<T, NDim>& p, std::int64_t i) {
  const auto k = static_cast<int>(i % p.k_columns);
  if (k >= p.k) return -1;
  auto row = static_cast<std::uint32_t>(i / p.k_columns);
  std::int64_t offset = static_cast<std::int64_t>(k) * p.strides[2];
  for (int d = NDim - 1; d >= 0; --d) {
    offset += static_cast<std::int64_t>(row % static_cast<std::uint32_t>(p.output[d])) * p.strides[3 + d];
    row /= static_cast<std::uint32_t>(p.output[d]);
  }
  return offset + static_cast<std::int64_t>(row) * p.strides[1];
}

/// At most 65536 blocks: the kernels loop past them.
inline unsigned unfold_blocks(std::int64_t blocks) {
  return static_cast<unsigned>(std::min<std::int64_t>(std::max<std::int64_t>(blocks, 1), 65536));
}

/// The unfold of `p` (rows_per_pass filled here): a block covers 256 / (row_columns / vector)
/// rows at a time.
template <typename T, int NDim>
Status launch_unfold(UnfoldParams<T, NDim> p, hipStream_t stream) {
  p.rows_per_pass = 256 / (p.geometry.row_columns / (16 / static_cast<int>(sizeof(T))));
  unfold_kernel<T, NDim><<<unfold_blocks(ceil_div<std::int64_t>(p.rows, p.rows_per_pass)), 256, 0, stream>>>(p);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("unfold_kernel");
  return Status::ok();
}

template <typename T, int NDim>
Status launch_fold(const FoldParams<T, NDim>& p, hipStream_t stream) {
  fold_kernel<T, NDim><<<unfold_blocks(ceil_div<std::int64_t>(p.elements, 256)), 256, 0, stream>>>(p);
  HIPGRAD_RETURN_IF_LAUNCH_ERROR("fold_kernel");
  return Status::ok();
}

}  // namespace hipgrad::conv::detail
