/// @file operands.hpp
/// @brief The implicit GEMM of one group and one split of backward-weight, as operand loaders
///        and an epilogue of the tile GEMM (gemm/collective/operand_loader.hpp):
///
///   dw[k, c, f] = Σ_{n, o} dy[n, k, o] · x[n, c, o·s + f·d − left_pad]
///
/// M = K (rows: dy's channels k), N = taps × Cp (columns (t, c), the channel c fastest; t over
/// the filter's taps, f_last fastest), and the GEMM's K is the split's share of the output
/// positions r = (n, o_1, …, o_NDim), o_last fastest. Cp is C rounded up to the vector length
/// where vectors run along the channels, so that no vector straddles two taps; the padded
/// channels read as zero and are never stored. Both operands are contiguous along their MN
/// (dy's k, x's c) in channels-last layouts: vectors run along the channels.
///
/// kVectors: dy's k stride and x's c stride are 1; else every vector is one element (kMaxVector
/// = 1: the SIMT path, any strides).
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"

namespace hipgrad::conv::detail {

/// Where an operand stands on a split's output positions: the position o per dimension, its
/// index within the split, and the operand's element offset there (n and o parts).
template <int NDim>
struct PositionCursor {
  Index offset;
  int o[NDim];
  int index;
};

/// The GEMM's K of one split: output positions first, first + 1, … (n, o_1, …, o_NDim in order,
/// o_last fastest), and how an operand's offset moves along them. at() divides once; advance()
/// moves along o_last by additions and divides again only where it wraps.
template <int NDim>
struct PositionWalk {
  FastDivmod lengths[NDim];  ///< output lengths
  int first;                 ///< the split's first position
  int k_extent;              ///< positions in the split
  Index stride_n;
  Index stride_o[NDim];  ///< the operand's offset per step of o_d

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE PositionCursor<NDim> at(int k) const {
    PositionCursor<NDim> t{};
    t.index = k;
    std::uint32_t rest = static_cast<std::uint32_t>(first + (k >= 0 && k < k_extent ? k : 0));
    t.offset = 0;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t quotient = 0, o = 0;
      lengths[d].divmod(rest, &quotient, &o);
      t.o[d] = static_cast<int>(o);
      t.offset += static_cast<Index>(t.o[d]) * stride_o[d];
      rest = quotient;
    }
    t.offset += static_cast<Index>(rest) * stride_n;
    return t;
  }

  /// at(t.index + delta) for delta ≥ 0.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance(PositionCursor<NDim>& t, int delta) const {
    t.index += delta;
    t.o[NDim - 1] += delta;
    t.offset += static_cast<Index>(delta) * stride_o[NDim - 1];
    if (t.o[NDim - 1] >= static_cast<int>(lengths[NDim - 1].divisor()) || t.index >= k_extent) t = at(t.index);
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool inside(const PositionCursor<NDim>& t) const {
    return t.index >= 0 && t.index < k_extent;
  }
};

/// A: dy of the group (rows m = k, columns the split's positions), MN-contiguous (k).
template <typename T, int NDim, bool kVectors>
struct DyRows {
  using Element = T;
  static constexpr bool kKContiguous = false;
  static constexpr int kMaxVector = kVectors ? 16 : 1;

  const T* data;  ///< dy of the group
  Index stride_k;
  int channels;             ///< K
  PositionWalk<NDim> walk;  ///< dy's n and o strides

  struct MnState {
    int k;
  };
  using KState = PositionCursor<NDim>;

  HIPGRAD_HOST_DEVICE int mn_size() const { return channels; }
  HIPGRAD_HOST_DEVICE int k_size() const { return walk.k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE MnState mn_state(int k) const { return {k}; }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState k_state(int r) const { return walk.at(r); }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance_k(KState& r, int delta) const { walk.advance(r, delta); }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(const MnState& m, const KState& r, int length) const {
    const bool inside = walk.inside(r) && m.k >= 0 && m.k < channels;
    const int rest = kVectors ? channels - m.k : 1;
    const int valid = rest < length ? rest : length;
    return {inside ? data + (r.offset + static_cast<Index>(m.k) * stride_k) : data, inside ? valid : 0};
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(int k, int r, int length) const {
    return vector(mn_state(k), k_state(r), length);
  }

  HIPGRAD_HOST_DEVICE bool whole_vectors(int length) const { return kVectors && channels % length == 0; }

  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    if (!kVectors || stride_k != 1) return false;
    bool aligned = reinterpret_cast<std::uintptr_t>(data) % (static_cast<std::uintptr_t>(length) * sizeof(T)) == 0;
    aligned = aligned && walk.stride_n % length == 0;
    for (int d = 0; d < NDim; ++d) aligned = aligned && walk.stride_o[d] % length == 0;
    return aligned;
  }
};

/// B: x of the group under the filter's taps (rows the split's positions, columns (t, c)),
/// MN-contiguous (c). Element (r, (t, c)) is x[n, c, o·s + f(t)·d − left_pad], zero outside x.
template <typename T, int NDim, bool kVectors>
struct XPatches {
  using Element = T;
  static constexpr bool kKContiguous = false;
  static constexpr int kMaxVector = kVectors ? 16 : 1;

  const T* data;  ///< x of the group
  Index stride_c;
  Index stride_x[NDim];
  int input_length[NDim];
  int conv_stride[NDim];
  int dilation[NDim];
  int left_pad[NDim];
  FastDivmod filter[NDim];
  FastDivmod padded_channels;  ///< Cp
  int channels;                ///< C
  int n_extent;                ///< taps × Cp
  PositionWalk<NDim> walk;     ///< x's n stride; per o_d, conv_stride·x's stride

  /// A column's part: the tap's shift of the input position (f·d − left_pad) and the offset of
  /// channel c there.
  struct MnState {
    Index offset;
    int shift[NDim];
    int c;
    int inside;
  };
  using KState = PositionCursor<NDim>;

  HIPGRAD_HOST_DEVICE int mn_size() const { return n_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return walk.k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE MnState mn_state(int column) const {
    MnState s{};
    const bool inside = column >= 0 && column < n_extent;
    std::uint32_t tap = 0, c = 0, rest = 0;
    padded_channels.divmod(static_cast<std::uint32_t>(inside ? column : 0), &tap, &c);
    s.c = static_cast<int>(c);
    s.inside = inside && s.c < channels;
    s.offset = static_cast<Index>(s.c) * stride_c;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t f = 0;
      filter[d].divmod(tap, &rest, &f);
      s.shift[d] = static_cast<int>(f) * dilation[d] - left_pad[d];
      s.offset += static_cast<Index>(s.shift[d]) * stride_x[d];
      tap = rest;
    }
    return s;
  }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState k_state(int r) const { return walk.at(r); }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance_k(KState& r, int delta) const { walk.advance(r, delta); }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(const MnState& m, const KState& r, int length) const {
    bool inside = m.inside != 0 && walk.inside(r);
    HIPGRAD_UNROLL
    for (int d = 0; d < NDim; ++d) {
      inside = inside && static_cast<unsigned>(r.o[d] * conv_stride[d] + m.shift[d]) < static_cast<unsigned>(input_length[d]);
    }
    const int rest = kVectors ? channels - m.c : 1;
    const int valid = rest < length ? rest : length;
    return {inside ? data + (r.offset + m.offset) : data, inside ? valid : 0};
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(int column, int r, int length) const {
    return vector(mn_state(column), k_state(r), length);
  }

  /// Vectors start at channels that are multiples of length (Cp is one), and C is one too.
  HIPGRAD_HOST_DEVICE bool whole_vectors(int length) const {
    return kVectors && channels % length == 0 && static_cast<int>(padded_channels.divisor()) % length == 0;
  }

  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    if (!kVectors || stride_c != 1) return false;
    bool aligned = reinterpret_cast<std::uintptr_t>(data) % (static_cast<std::uintptr_t>(length) * sizeof(T)) == 0;
    aligned = aligned && walk.stride_n % length == 0 && static_cast<int>(padded_channels.divisor()) % length == 0;
    for (int d = 0; d < NDim; ++d) aligned = aligned && stride_x[d] % length == 0;
    return aligned;
  }
};

/// The epilogue: element (m, (t, c)) to dw[g, k, c, f(t)] (m = g·K + k; a group's sub-problem
/// has m < K and `out` at its group), converted once from the fp32 sum; or, for one split of
/// several, the raw fp32 sum to `split_sums` (rows of n_size), which a fixed-order reduction
/// (gemm::reduce_split_k over this epilogue without split_sums) adds up. Padded channels
/// (c ≥ C) are never stored to dw. Grouped launches do not split K, so `partials` stays null.
template <typename T, int NDim>
struct DwStore {
  T* out;
  float* split_sums;  ///< null: store dw
  Index stride_g;
  Index stride_k;
  Index stride_c;
  Index stride_f[NDim];
  FastDivmod channels_k;  ///< K: m = g·K + k
  FastDivmod padded_channels;
  FastDivmod filter[NDim];
  int channels;  ///< C
  int m_size;
  int n_size;
  float* partials;

  /// dw's offset of element (m, column); false for a padded channel.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool offset(int m, int column, Index* at) const {
    std::uint32_t g = 0, k = 0, tap = 0, c = 0, rest = 0;
    channels_k.divmod(static_cast<std::uint32_t>(m), &g, &k);
    padded_channels.divmod(static_cast<std::uint32_t>(column), &tap, &c);
    if (static_cast<int>(c) >= channels) return false;
    Index o = static_cast<Index>(g) * stride_g + static_cast<Index>(k) * stride_k + static_cast<Index>(c) * stride_c;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t f = 0;
      filter[d].divmod(tap, &rest, &f);
      o += static_cast<Index>(f) * stride_f[d];
      tap = rest;
    }
    *at = o;
    return true;
  }

  /// What a split stores of its sum: the fp32 value itself, never rounded to T (the reduction
  /// converts once).
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE static float split_sum(float accumulator) { return accumulator; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store(int m, int column, float accumulator, int) const {
    if (m >= m_size || column >= n_size) return;
    if (split_sums != nullptr) {
      split_sums[static_cast<Index>(m) * n_size + column] = split_sum(accumulator);
      return;
    }
    Index at = 0;
    if (offset(m, column, &at)) out[at] = type_convert<T>(accumulator);
  }

  /// A run of columns as 16-byte stores where it lies whole inside one row: fp32 split sums, or
  /// channels of one tap where dw's c is contiguous.
  HIPGRAD_DEVICE HIPGRAD_INLINE void store_vector(int m, int column, const float* accumulators, int split) const {
    if (m >= m_size) return;
    if (column + gemm::kEpilogueVector <= n_size) {
      if (split_sums != nullptr) {
        float* p = split_sums + (static_cast<Index>(m) * n_size + column);
        if (is_vector_aligned<float, kVector16<float>>(p)) {
          float sums[gemm::kEpilogueVector];
          for (int j = 0; j < gemm::kEpilogueVector; ++j) sums[j] = split_sum(accumulators[j]);
          return gemm::store_scaled_vector(p, sums, 1.0f);
        }
      } else if (stride_c == 1) {
        Index at = 0;
        std::uint32_t tap = 0, c = 0;
        padded_channels.divmod(static_cast<std::uint32_t>(column), &tap, &c);
        if (static_cast<int>(c) + gemm::kEpilogueVector <= channels && offset(m, column, &at) &&
            is_vector_aligned<T, kVector16<T>>(out + at)) {
          return gemm::store_scaled_vector(out + at, accumulators, 1.0f);
        }
      }
    }
    for (int j = 0; j < gemm::kEpilogueVector; ++j) store(m, column + j, accumulators[j], split);
  }
};

}  // namespace hipgrad::conv::detail
