/// @file window_fill.hpp
/// @brief Host and device: copies a window of an activation tensor into shared memory as fp32,
///        [lanes][positions], zero outside the tensor, walking the tensor's contiguous dimension
///        fastest (its channels for channels-last, W for NCHW) in 16-byte vectors where they are
///        aligned, several loads in flight per thread: the fill is what moves the op's bytes.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/direct/params.hpp"

namespace hipgrad::conv::direct {

/// Loads a thread keeps in flight while filling (cells of kVector16 elements each).
inline constexpr int kFillBatch = 4;

/// A window of one batch item and one group tile: `base` points at (n, first group, first
/// channel); lanes past `valid_groups` groups or `valid_channels` channels per group read zero.
template <typename T, int NDim>
struct WindowSource {
  const T* base;
  const TensorStrides<NDim>* strides;
  int valid_groups, valid_channels;
  int origin[NDim];  ///< the window's first position per dimension (may be negative)
  int length[NDim];  ///< the window's positions per dimension
  int extent[NDim];  ///< the tensor's positions per dimension
};

/// Digits of a mixed-radix counter, advanced by a fixed step with carries (no division per step).
template <int kDigits>
struct Odometer {
  int digit[kDigits];
  int radix[kDigits];
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void start(int value) {
    for (int d = kDigits - 1; d >= 0; --d) {
      digit[d] = value % radix[d];
      value /= radix[d];
    }
  }
  /// Adds `step` to the last digit; the first digit may grow past its radix (the end).
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance(int step) {
    digit[kDigits - 1] += step;
    for (int d = kDigits - 1; d > 0; --d) {
      while (digit[d] >= radix[d]) {
        digit[d] -= radix[d];
        ++digit[d - 1];
      }
    }
  }
};

/// kWidth values of T, kept as loaded (16 bytes: few registers while several are in flight):
/// `valid` elements `step` apart from p, the rest zero; one vector load where all kWidth are
/// valid, contiguous and aligned.
template <typename T, int kWidth>
struct Cell {
  Vector<T, kWidth> raw;
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void load(const T* p, std::int64_t step, int valid) {
    if constexpr (kWidth > 1) {
      if (valid == kWidth && step == 1 && is_vector_aligned<T, kWidth>(p)) {
        raw = load_vector<kWidth>(p);
        return;
      }
    }
    HIPGRAD_UNROLL
    for (int e = 0; e < kWidth; ++e) raw[e] = e < valid ? p[e * step] : T{};
  }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void zero() {
    HIPGRAD_UNROLL
    for (int e = 0; e < kWidth; ++e) raw[e] = T{};
  }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE float operator[](int e) const { return type_convert<float>(raw[e]); }
};

/// Lanes fastest: each thread takes a chunk of kWidth lanes (contiguous in memory where the box's
/// lanes are) and walks the positions with an odometer, kFillBatch cells at a time.
template <typename T, int NDim, int kWidth>
HIPGRAD_HOST_DEVICE void fill_lanes_fastest(float* smem, const WindowSource<T, NDim>& src, const WindowLanes& box,
                                            int tid, int threads) {
  const int chunks = (box.lanes + kWidth - 1) / kWidth;
  const int chunk_threads = chunks < threads ? chunks : threads;
  const int position_threads = threads / chunk_threads;
  const int first_chunk = tid % chunk_threads, first_position = tid / chunk_threads;
  if (first_position >= position_threads) return;
  int positions = 1;
  for (int d = 0; d < NDim; ++d) positions *= src.length[d];
  const TensorStrides<NDim>& s = *src.strides;
  for (int chunk = first_chunk; chunk < chunks; chunk += chunk_threads) {
    // The chunk's lanes: valid ones first (a partial chunk ends the box or the valid lanes), in
    // memory `step` apart where they lie evenly, else one at a time.
    const int lane0 = chunk * kWidth;
    auto lane_offset = [&](int lane) { return (lane / box.per_group) * s.g + (lane % box.per_group) * s.c; };
    int valid = 0;
    bool even = true;
    const std::int64_t base = lane_offset(lane0);
    const std::int64_t step = kWidth > 1 ? lane_offset(lane0 + 1) - base : 1;
    for (int e = 0; e < kWidth; ++e) {
      const int lane = lane0 + e;
      if (lane < box.lanes && lane / box.per_group < src.valid_groups && lane % box.per_group < src.valid_channels &&
          valid == e)
        ++valid;
      even = even && lane_offset(lane) - base == e * step;
    }
    Odometer<NDim> at;
    for (int d = 0; d < NDim; ++d) at.radix[d] = src.length[d];
    at.start(first_position);
    for (int position = first_position; position < positions; position += kFillBatch * position_threads) {
      Cell<T, kWidth> cells[kFillBatch];
      HIPGRAD_UNROLL
      for (int b = 0; b < kFillBatch; ++b) {
        bool inside = position + b * position_threads < positions && valid > 0;
        std::int64_t offset = 0;
        HIPGRAD_UNROLL
        for (int d = 0; d < NDim; ++d) {
          const int x = src.origin[d] + at.digit[d];
          inside = inside && x >= 0 && x < src.extent[d];
          offset += static_cast<std::int64_t>(x) * s.spatial[d];
        }
        at.advance(position_threads);
        if (!inside) {
          cells[b].zero();
        } else if (even) {
          cells[b].load(src.base + base + offset, step, valid);
        } else {
          HIPGRAD_UNROLL
          for (int e = 0; e < kWidth; ++e)
            cells[b].raw[e] = e < valid ? src.base[lane_offset(lane0 + e) + offset] : T{};
        }
      }
      HIPGRAD_UNROLL
      for (int b = 0; b < kFillBatch; ++b) {
        const int p = position + b * position_threads;
        if (p >= positions) break;
        // Rows of an odd pitch: a warp's (chunk, position) pairs store to distinct banks.
        float* to = smem + lane0 * box.pitch + p;
        HIPGRAD_UNROLL
        for (int e = 0; e < kWidth; ++e)
          if (lane0 + e < box.lanes) to[e * box.pitch] = cells[b][e];
      }
    }
  }
}

/// W fastest: each thread takes a chunk of kWidth positions along W and rows (a lane at one
/// position of the other dimensions, lanes fastest: consecutive threads store an odd pitch
/// apart, to distinct banks), kFillBatch rows at a time.
template <typename T, int NDim, int kWidth>
HIPGRAD_HOST_DEVICE void fill_w_fastest(float* smem, const WindowSource<T, NDim>& src, const WindowLanes& box, int tid,
                                        int threads) {
  constexpr int W = NDim - 1;
  const int width = src.length[W];
  const int chunks = (width + kWidth - 1) / kWidth;
  int rows = box.lanes;
  for (int d = 0; d < W; ++d) rows *= src.length[d];
  const int row_threads = rows < threads ? rows : threads;
  const int chunk_threads = threads / row_threads;
  const int first_row = tid % row_threads, first_chunk = tid / row_threads;
  if (first_chunk >= chunk_threads) return;
  const TensorStrides<NDim>& s = *src.strides;
  for (int c = first_chunk; c < chunks; c += chunk_threads) {
    const int w0 = c * kWidth;
    const int x0 = src.origin[W] + w0;
    // The chunk's positions inside the tensor: [first_in, last_in) of its kWidth.
    const int first_in = x0 < 0 ? -x0 : 0;
    const int last_in = src.extent[W] - x0 < kWidth ? src.extent[W] - x0 : kWidth;
    for (int row = first_row; row < rows; row += kFillBatch * row_threads) {
      Cell<T, kWidth> cells[kFillBatch];
      HIPGRAD_UNROLL
      for (int b = 0; b < kFillBatch; ++b) {
        const int r = row + b * row_threads;
        const int lane = r % box.lanes, outer = r / box.lanes;
        const int group = lane / box.per_group, channel = lane % box.per_group;
        bool inside = r < rows && group < src.valid_groups && channel < src.valid_channels && first_in < last_in;
        std::int64_t offset = group * s.g + channel * s.c;
        for (int d = W - 1, rest = outer; d >= 0; --d) {
          const int x = src.origin[d] + rest % src.length[d];
          rest /= src.length[d];
          inside = inside && x >= 0 && x < src.extent[d];
          offset += static_cast<std::int64_t>(x) * s.spatial[d];
        }
        if (!inside) {
          cells[b].zero();
        } else if (first_in == 0) {
          cells[b].load(src.base + offset + static_cast<std::int64_t>(x0) * s.spatial[W], s.spatial[W], last_in);
        } else {
          HIPGRAD_UNROLL
          for (int e = 0; e < kWidth; ++e)
            cells[b].raw[e] = e >= first_in && e < last_in
                                  ? src.base[offset + static_cast<std::int64_t>(x0 + e) * s.spatial[W]]
                                  : T{};
        }
      }
      HIPGRAD_UNROLL
      for (int b = 0; b < kFillBatch; ++b) {
        const int r = row + b * row_threads;
        if (r >= rows) break;
        const int lane = r % box.lanes, outer = r / box.lanes;
        HIPGRAD_UNROLL
        for (int e = 0; e < kWidth; ++e)
          if (w0 + e < width) smem[lane * box.pitch + outer * width + w0 + e] = cells[b][e];
      }
    }
  }
}

/// Fills `smem` with the window of `src` in `box`'s order, in cells of 16 bytes of T.
template <typename T, int NDim>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void fill_window(float* smem, const WindowSource<T, NDim>& src,
                                                    const WindowLanes& box, int tid, int threads) {
  if (box.lanes_fastest)
    fill_lanes_fastest<T, NDim, kVector16<T>>(smem, src, box, tid, threads);
  else
    fill_w_fastest<T, NDim, kVector16<T>>(smem, src, box, tid, threads);
}

}  // namespace hipgrad::conv::direct
