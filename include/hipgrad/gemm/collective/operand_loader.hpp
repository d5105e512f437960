/// @file operand_loader.hpp
/// @brief Operand loaders: where element (mn, k) of a GEMM operand lives in global memory.
///
/// The mainloops never index a matrix themselves; they ask a loader. "MN" is M for A[M, K] and
/// N for B[K, N]. A loader provides
///
///   using Element = T;
///   static constexpr bool kKContiguous;     // vector reads run along K (else along MN)
///   int mn_size() const, k_size() const;    // the operand's extent
///   VectorSource<T> vector(int mn, int k, int length) const;
///       // the address of element (mn, k) and how many of the `length` elements from there along
///       // the contiguous dimension exist (0..length), which lie at consecutive addresses; with 0
///       // the address is any readable one and (mn, k) reads as zero
///   bool vectors_aligned(int length) const; // every vector(…, length) start is length·sizeof(T) aligned
///   static constexpr int kMaxVector;        // optional: vector() returns at most this many
///                                           // (LoaderMaxVector); the SIMT path then asks element by element
///   bool whole_vectors(int length) const;   // optional (loader_whole_vectors): every vector(…, length)
///                                           // whose contiguous index is a multiple of length has
///                                           // 0 or length valid elements
///
/// and, for the mainloops that keep per-row state across K tiles, the same vector in two halves:
///
///   MnState mn_state(int mn) const;         // what depends on mn alone (a row's address, bounds)
///   KState k_state(int k) const;            // what depends on k alone
///   void advance_k(KState&, int delta) const;  // to k_state(k + delta), cheaper where it can be
///   VectorSource<T> vector(const MnState&, const KState&, int length) const;
///       // equal to vector(mn, k, length) for the mn and k the states were made from
///
/// so that an index decomposition is paid once per row of a tile, not once per 16-byte copy.
/// Offsets are 64-bit (Index): a tensor may hold more than 2^31 elements.
///
/// DenseOperand below is a row- or column-major matrix. An implicit-im2col loader of a
/// convolution provides the same members: with channels-last tensors a K vector is `length`
/// consecutive channels of one filter tap, so `vector` returns the address of input pixel
/// (n, oh·s − p + r·d, …, c) and 0 valid elements where the tap falls into the padding.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/strides.hpp"

namespace hipgrad::gemm {

/// The longest vector a loader's vector() returns: Loader::kMaxVector where it declares one (1:
/// its elements are read one at a time, as with channels that are not contiguous), else any.
template <typename Loader, typename = void>
struct LoaderMaxVector {
  static constexpr int value = 1 << 30;
};
template <typename Loader>
struct LoaderMaxVector<Loader, std::void_t<decltype(Loader::kMaxVector)>> {
  static constexpr int value = Loader::kMaxVector;
};

/// Loader::whole_vectors(length) where the loader has it, else false (vectors may be partial).
template <typename Loader, typename = void>
struct LoaderWholeVectors {
  HIPGRAD_HOST_DEVICE static bool of(const Loader&, int) { return false; }
};
template <typename Loader>
struct LoaderWholeVectors<Loader, std::void_t<decltype(std::declval<const Loader&>().whole_vectors(1))>> {
  HIPGRAD_HOST_DEVICE static bool of(const Loader& loader, int length) { return loader.whole_vectors(length); }
};
template <typename Loader>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool loader_whole_vectors(const Loader& loader, int length) {
  return LoaderWholeVectors<Loader>::of(loader, length);
}

template <typename T>
struct VectorSource {
  const T* pointer;
  int valid;
};

/// A dense operand: element (mn, k) at data[mn·stride + k] when K-contiguous, data[k·stride + mn]
/// otherwise (stride: the leading dimension, in elements).
template <typename T, bool kKContiguous_>
struct DenseOperand {
  using Element = T;
  static constexpr bool kKContiguous = kKContiguous_;

  const T* data;
  Index stride;
  int mn_extent;
  int k_extent;

  HIPGRAD_HOST_DEVICE int mn_size() const { return mn_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return k_extent; }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE VectorSource<T> vector(int mn, int k, int length) const {
    const int outer = kKContiguous ? mn : k, inner = kKContiguous ? k : mn;
    const int outer_size = kKContiguous ? mn_extent : k_extent, inner_size = kKContiguous ? k_extent : mn_extent;
    if (outer >= outer_size || inner >= inner_size) return {data, 0};
    const int rest = inner_size - inner;
    return {data + static_cast<Index>(outer) * stride + inner, rest < length ? rest : length};
  }

  /// The two halves of an element's place: the outer index (mn when K-contiguous, else k) with
  /// the address of its row, and the inner index, along which vectors run.
  struct Outer {
    const T* row;
    int index;
  };
  struct Inner {
    int index;
  };
  using MnState = std::conditional_t<kKContiguous, Outer, Inner>;
  using KState = std::conditional_t<kKContiguous, Inner, Outer>;
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE MnState mn_state(int mn) const { return state<kKContiguous>(mn); }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE KState k_state(int k) const { return state<!kKContiguous>(k); }
  /// k_state(k.index + delta), by one 64-bit addition where k is the outer index.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void advance_k(KState& k, int delta) const {
    if constexpr (!kKContiguous) k.row += static_cast<Index>(delta) * stride;
    k.index += delta;
  }
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE VectorSource<T> vector(const MnState& mn, const KState& k, int length) const {
    const Outer& outer = pick_outer(mn, k);
    const int inner = pick_inner(mn, k).index;
    const int outer_size = kKContiguous ? mn_extent : k_extent, inner_size = kKContiguous ? k_extent : mn_extent;
    const int rest = inner_size - inner;
    // Selects, not branches: the copy loops stay straight.
    const bool inside = outer.index < outer_size && rest > 0;
    return {inside ? outer.row + inner : data, inside ? (rest < length ? rest : length) : 0};
  }

  HIPGRAD_HOST_DEVICE bool whole_vectors(int length) const {
    return (kKContiguous ? k_extent : mn_extent) % length == 0;
  }

  HIPGRAD_HOST_DEVICE bool vectors_aligned(int length) const {
    const auto bytes = static_cast<std::uintptr_t>(length) * sizeof(T);
    return reinterpret_cast<std::uintptr_t>(data) % bytes == 0 && stride % length == 0;
  }

 private:
  template <bool kOuter>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE std::conditional_t<kOuter, Outer, Inner> state(int index) const {
    if constexpr (kOuter) {
      return {data + static_cast<Index>(index) * stride, index};
    } else {
      return {index};
    }
  }
  HIPGRAD_HOST_DEVICE static const Outer& pick_outer(const MnState& mn, const KState& k) {
    if constexpr (kKContiguous) {
      return mn;
    } else {
      return k;
    }
  }
  HIPGRAD_HOST_DEVICE static const Inner& pick_inner(const MnState& mn, const KState& k) {
    if constexpr (kKContiguous) {
      return k;
    } else {
      return mn;
    }
  }
};

}  // namespace hipgrad::gemm
