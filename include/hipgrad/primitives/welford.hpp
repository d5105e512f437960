/// @file welford.hpp
/// @brief Welford's running mean and variance: per-element update, the pairwise merge of two
///        partial states (Chan, Golub and LeVeque), and block and warp merges.
///
/// Used for normalisation statistics: every thread folds its elements into a state, the states
/// of a block are merged with block_merge(), and partial states of several blocks can be merged
/// the same way from a workspace. Merging avoids the cancellation of E[x²] − E[x]² when the mean
/// is large against the spread.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/primitives/block_reduce.hpp"
#include "hipgrad/primitives/warp_reduce.hpp"

namespace hipgrad {

/// Mean, sum of squared deviations (m2) and count of a set of values. The count is kept in T:
/// exact up to 2^24 for float, and above that its relative error (2^-24) only perturbs the merge
/// weights, not the sums.
template <typename T = float>
struct WelfordState {
  T mean;
  T m2;
  T count;

  HIPGRAD_HOST_DEVICE static constexpr WelfordState empty() { return {T(0), T(0), T(0)}; }
  /// The state of a chunk whose mean and m2 were computed some other way.
  HIPGRAD_HOST_DEVICE static constexpr WelfordState of_chunk(T mean, T m2, T count) { return {mean, m2, count}; }

  /// Population variance m2 / count (0 for an empty state).
  HIPGRAD_HOST_DEVICE T variance() const { return count > T(0) ? m2 / count : T(0); }
};

/// Folds one value into the state.
template <typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void welford_update(WelfordState<T>& s, T value) {
  s.count += T(1);
  const T delta = value - s.mean;
  s.mean += delta / s.count;
  s.m2 += delta * (value - s.mean);
}

/// The state of the union of two sets. Empty states merge as the identity, without dividing by 0.
template <typename T>
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WelfordState<T> welford_merge(const WelfordState<T>& a, const WelfordState<T>& b) {
  const T count = a.count + b.count;
  if (b.count == T(0)) return a;
  if (a.count == T(0)) return b;
  const T b_weight = b.count / count;
  const T delta = b.mean - a.mean;
  WelfordState<T> r;
  r.mean = a.mean + delta * b_weight;
  r.m2 = a.m2 + b.m2 + delta * delta * a.count * b_weight;
  r.count = count;
  return r;
}

/// welford_merge as a reduction operator.
struct WelfordMergeOp {
  template <typename T>
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE WelfordState<T> operator()(const WelfordState<T>& a,
                                                                const WelfordState<T>& b) const {
    return welford_merge(a, b);
  }
};

template <typename T, int BlockThreads>
using BlockWelford = BlockReduce<WelfordState<T>, BlockThreads>;

/// Merges the states of all threads of the block; every thread gets the result.
template <int BlockThreads, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE WelfordState<T> block_welford_merge(
    const WelfordState<T>& state, typename BlockWelford<T, BlockThreads>::TempStorage& storage) {
  return BlockWelford<T, BlockThreads>(storage).all_reduce(state, WelfordMergeOp{});
}

/// Merges the states of a logical warp; every lane gets the result.
template <int LogicalWarpThreads, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE WelfordState<T> warp_welford_merge(
    const WelfordState<T>& state, typename WarpReduce<WelfordState<T>, LogicalWarpThreads>::TempStorage& storage) {
  return WarpReduce<WelfordState<T>, LogicalWarpThreads>(storage).all_reduce(state, WelfordMergeOp{});
}

}  // namespace hipgrad
