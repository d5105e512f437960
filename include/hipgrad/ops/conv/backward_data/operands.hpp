/// @file operands.hpp
/// @brief The implicit GEMM of one stride phase of one group of backward-data, as operand loaders
///        and an epilogue of the tile GEMM (gemm/collective/operand_loader.hpp):
///
///   dx[n, c, x(i)] = Σ_{t, k} dy[n, k, o(i, t)] · w[k, c, f(t)]
///
/// M = N × Π count (rows m = (n, i), i_last fastest), N = C, K = taps × Kp (k = (t, k), the
/// channel k fastest; t = (j_1, …) over the phase's taps, j_last fastest), with the phase's
/// x(i) = first + i·s, f(j) = first_tap + j·tap_step and o = output_base + i − j·tap_dilation
/// (stride_phases.hpp). Kp is K rounded up to the vector length where vectors run along the
/// channels, so that no vector straddles two taps; the padded channels read as zero.
///
/// kVectors: dy's and w's channels are contiguous (dy's k stride and w's c stride 1), so that
/// vectors of consecutive channels exist; else every vector is one element (kMaxVector = 1: the
/// SIMT path, any strides).
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

/// Where one operand stands on the GEMM's K = (t, channel): the phase's tap (j per dimension),
/// the channel within Kp, k itself, and the operand's element offset there.
template <int NDim>
struct TapCursor {
  Index offset;
  int j[NDim];
  int channel;
  int index;
};

/// The K dimension, taps × Kp, and how one operand's offset moves along it: by channel_offset per
/// channel and tap_offset[d] per tap of dimension d, from `base`. at(k) divides k into its parts
/// once; advance() moves a cursor on by additions, so a loader's k state costs a few a row.
template <int NDim>
struct TapWalk {
  FastDivmod taps[NDim];  ///< taps of each dimension
  FastDivmod padded_channels;
  int k_extent;
  Index base;
  Index channel_offset;
  Index tap_offset[NDim];

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE TapCursor<NDim> at(int k) const {
    TapCursor<NDim> t{};
    t.index = k;
    std::uint32_t rest = 0, tap = 0, channel = 0;
    padded_channels.divmod(static_cast<std::uint32_t>(k >= 0 && k < k_extent ? k : 0), &tap, &channel);
    t.channel = static_cast<int>(channel);
    t.offset = base + static_cast<Index>(t.channel) * channel_offset;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t j = 0;
      taps[d].divmod(tap, &rest, &j);
      t.j[d] = static_cast<int>(j);
      t.offset += static_cast<Index>(t.j[d]) * tap_offset[d];
      tap = rest;
    }
    return t;
  }

  /// at(t.index + delta) for delta ≥ 0: within one tap's channels a few additions; past them
  /// at() again (once every Kp / delta advances), so that between carries a walking loader
  /// keeps only the offset, channel and index in registers. Past the last tap the cursor is
  /// outside (index ≥ k_extent).
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance(TapCursor<NDim>& t, int delta) const {
    t.index += delta;
    t.channel += delta;
    t.offset += static_cast<Index>(delta) * channel_offset;
    if (t.channel >= static_cast<int>(padded_channels.divisor())) t = at(t.index);
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool inside(const TapCursor<NDim>& t, int channels) const {
    return t.index >= 0 && t.index < k_extent && t.channel < channels;
  }
};

/// A: dy of the phase (rows m = (n, i), columns k = (t, channel)), K-contiguous.
template <typename T, int NDim, bool kVectors>
struct DyGather {
  using Element = T;
  static constexpr bool kKContiguous = true;
  static constexpr int kMaxVector = kVectors ? 16 : 1;

  const T* data;  ///< dy of the group
  Index stride_n;
  Index stride_o[NDim];
  int output_length[NDim];
  int output_base[NDim];
  int tap_dilation[NDim];
  FastDivmod count[NDim];  ///< dx positions of the phase per dimension
  int channels;            ///< K
  int m_extent;
  TapWalk<NDim> walk;  ///< channel: dy's k stride; tap d: −tap_dilation·stride_o

  struct MnState {
    const T* row;       ///< dy at (n, o = output_base + i)
    int first_o[NDim];  ///< output_base + i
    int inside;         ///< m < M
  };
  /// The cursor and what vector() needs of it, made once per state: the gather producer keeps a
  /// k state over a whole K tile's chunks.
  struct KState {
    TapCursor<NDim> at;
    int shift[NDim];  ///< j·tap_dilation: how far the tap moves o back
    int valid;        ///< channels from the cursor's on (0 outside K)
  };

  HIPGRAD_HOST_DEVICE int mn_size() const { return m_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return walk.k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE MnState mn_state(int m) const {
    MnState s{};
    s.inside = m >= 0 && m < m_extent;
    std::uint32_t rest = static_cast<std::uint32_t>(s.inside ? m : 0);
    Index offset = 0;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t quotient = 0, i = 0;
      count[d].divmod(rest, &quotient, &i);
      s.first_o[d] = output_base[d] + static_cast<int>(i);
      offset += static_cast<Index>(s.first_o[d]) * stride_o[d];
      rest = quotient;
    }
    s.row = data + (static_cast<Index>(rest) * stride_n + offset);
    return s;
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState k_state(int k) const { return state_at(walk.at(k)); }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance_k(KState& k, int delta) const {
    walk.advance(k.at, delta);
    k = state_at(k.at);
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(const MnState& m, const KState& k, int length) const {
    bool inside = m.inside != 0 && k.valid > 0;
    HIPGRAD_UNROLL
    for (int d = 0; d < NDim; ++d) {
      inside = inside && static_cast<unsigned>(m.first_o[d] - k.shift[d]) < static_cast<unsigned>(output_length[d]);
    }
    const int valid = k.valid < length ? k.valid : length;
    return {inside ? m.row + k.at.offset : data, inside ? valid : 0};
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(int m, int k, int length) const {
    return vector(mn_state(m), k_state(k), length);
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState state_at(const TapCursor<NDim>& at) const {
    KState k{};
    k.at = at;
    HIPGRAD_UNROLL
    for (int d = 0; d < NDim; ++d) k.shift[d] = at.j[d] * tap_dilation[d];
    k.valid = walk.inside(at, channels) ? (kVectors ? channels - at.channel : 1) : 0;
    return k;
  }

  /// Vectors start at channels that are multiples of length (Kp is one), and K is one too.
  HIPGRAD_HOST_DEVICE bool whole_vectors(int length) const {
    return kVectors && channels % length == 0 && static_cast<int>(walk.padded_channels.divisor()) % length == 0;
  }

  /// Every vector of `length` starts length·sizeof(T)-aligned: the base, and every stride a k
  /// vector start is moved by (n, o, and Kp keeps vectors inside one tap).
  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    if (!kVectors || walk.channel_offset != 1) return false;
    bool aligned = reinterpret_cast<std::uintptr_t>(data) % (static_cast<std::uintptr_t>(length) * sizeof(T)) == 0;
    aligned = aligned && stride_n % length == 0 && static_cast<int>(walk.padded_channels.divisor()) % length == 0;
    for (int d = 0; d < NDim; ++d) aligned = aligned && stride_o[d] % length == 0;
    return aligned;
  }
};

/// B: w of the phase's taps (rows k = (t, channel), columns c), MN-contiguous (c).
template <typename T, int NDim, bool kVectors>
struct WeightGather {
  using Element = T;
  static constexpr bool kKContiguous = false;
  static constexpr int kMaxVector = kVectors ? 16 : 1;

  const T* data;  ///< w of the group
  Index stride_c;
  int channels;        ///< K
  int c_extent;        ///< C
  TapWalk<NDim> walk;  ///< base: the phase's first taps; channel: w's k stride; tap d: tap_step·stride_f

  struct MnState {
    int c;
  };
  using KState = TapCursor<NDim>;

  HIPGRAD_HOST_DEVICE int mn_size() const { return c_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return walk.k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE MnState mn_state(int c) const { return {c}; }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState k_state(int k) const { return walk.at(k); }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance_k(KState& k, int delta) const { walk.advance(k, delta); }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(const MnState& m, const KState& k, int length) const {
    const bool inside = walk.inside(k, channels) && m.c >= 0 && m.c < c_extent;
    const int rest = kVectors ? c_extent - m.c : 1;
    const int valid = rest < length ? rest : length;
    return {inside ? data + (k.offset + static_cast<Index>(m.c) * stride_c) : data, inside ? valid : 0};
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE gemm::VectorSource<T> vector(int c, int k, int length) const {
    return vector(mn_state(c), k_state(k), length);
  }

  HIPGRAD_HOST_DEVICE bool whole_vectors(int length) const { return kVectors && c_extent % length == 0; }

  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    if (!kVectors || stride_c != 1) return false;
    bool aligned = reinterpret_cast<std::uintptr_t>(data) % (static_cast<std::uintptr_t>(length) * sizeof(T)) == 0;
    aligned = aligned && walk.base % length == 0 && walk.channel_offset % length == 0;
    for (int d = 0; d < NDim; ++d) aligned = aligned && walk.tap_offset[d] % length == 0;
    return aligned;
  }
};

/// The epilogue: element (m, c) of the phase's product to dx[n, c, first + i·s], converted once
/// from the fp32 sum. Grouped launches do not split K, so `partials` stays null.
template <typename T, int NDim>
struct DxScatter {
  T* out;  ///< dx of the group at the phase's first position
  Index stride_n;
  Index stride_c;
  Index stride_i[NDim];  ///< dx's stride times the phase's stride s
  FastDivmod count[NDim];
  int m_size;
  int n_size;
  float* partials;

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE Index offset(int m, int c) const {
    std::uint32_t rest = static_cast<std::uint32_t>(m);
    Index o = static_cast<Index>(c) * stride_c;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      std::uint32_t quotient = 0, i = 0;
      count[d].divmod(rest, &quotient, &i);
      o += static_cast<Index>(i) * stride_i[d];
      rest = quotient;
    }
    return o + static_cast<Index>(rest) * stride_n;
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store(int m, int c, float accumulator, int) const {
    if (m >= m_size || c >= n_size) return;
    out[offset(m, c)] = type_convert<T>(accumulator);
  }

  /// The position's offset once for the run of channels, one 16-byte store where they are
  /// contiguous and aligned.
  HIPGRAD_DEVICE HIPGRAD_INLINE void store_vector(int m, int c, const float* accumulators, int split) const {
    if (m >= m_size) return;
    if (stride_c == 1 && c + gemm::kEpilogueVector <= n_size) {
      T* p = out + offset(m, c);
      if (is_vector_aligned<T, kVector16<T>>(p)) return gemm::store_scaled_vector(p, accumulators, 1.0f);
    }
    for (int j = 0; j < gemm::kEpilogueVector; ++j) store(m, c + j, accumulators[j], split);
  }
};

}  // namespace hipgrad::conv::detail
