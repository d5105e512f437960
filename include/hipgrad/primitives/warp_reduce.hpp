/// @file warp_reduce.hpp
/// @brief Warp-wide reductions (sum, max, any associative operator) over logical warps of a
///        power-of-two width, backed by CUB on NVIDIA and rocPRIM on AMD.
///
/// Usage, CUB-style: place one TempStorage per logical warp in shared memory and construct a
/// WarpReduce over it in every lane:
///
///   using Reduce = hipgrad::WarpReduce<hipgrad::Array<float, 2>, 32>;
///   __shared__ Reduce::TempStorage storage[kWarpsPerBlock];
///   auto sums = Reduce(storage[warp]).all_sum({dy, dy * x});
///
/// Every lane of the logical warp must call (the operations are convergent). For a fixed width
/// the order of combination is fixed, so results are bitwise reproducible.
#pragma once

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/primitives/reduce_ops.hpp"

#if defined(HIPGRAD_BACKEND_CUDA)
#include <cub/warp/warp_reduce.cuh>
#else
#include <rocprim/warp/warp_reduce.hpp>
#endif

namespace hipgrad {

/// Reduces T over logical warps of `LogicalWarpThreads` lanes (0 means the hardware warp).
template <typename T, int LogicalWarpThreads = 0>
class WarpReduce : public ReductionShortcuts<WarpReduce<T, LogicalWarpThreads>, T> {
 public:
  static constexpr int kThreads = LogicalWarpThreads == 0 ? warp_size() : LogicalWarpThreads;
  static_assert(kThreads > 0 && (kThreads & (kThreads - 1)) == 0, "WarpReduce: the width must be a power of two");
  static_assert(kThreads <= warp_size(), "WarpReduce: the width exceeds the hardware warp");

 private:
#if defined(HIPGRAD_BACKEND_CUDA)
  using Impl = cub::WarpReduce<T, kThreads>;
  using ImplStorage = typename Impl::TempStorage;
#else
  // All-reduce leaves the result in every lane, which also serves reduce().
  using Impl = rocprim::warp_reduce<T, static_cast<unsigned>(kThreads), true>;
  using ImplStorage = typename Impl::storage_type;
#endif

 public:
  struct TempStorage {
    ImplStorage impl;
  };

  HIPGRAD_DEVICE explicit WarpReduce(TempStorage& storage) : storage_(storage) {}

  /// The reduction of every lane's `value`; valid in the first lane of each logical warp.
  template <typename Op>
  HIPGRAD_DEVICE HIPGRAD_INLINE T reduce(const T& value, Op op) {
#if defined(HIPGRAD_BACKEND_CUDA)
    return Impl(storage_.impl).Reduce(value, op);
#else
    T result;
    Impl().reduce(value, result, storage_.impl, op);
    return result;
#endif
  }

  /// The reduction, returned to every lane of the logical warp.
  template <typename Op>
  HIPGRAD_DEVICE HIPGRAD_INLINE T all_reduce(const T& value, Op op) {
#if defined(HIPGRAD_BACKEND_CUDA)
    return shfl(reduce(value, op), 0, kThreads);
#else
    return reduce(value, op);
#endif
  }

 private:
  TempStorage& storage_;
};

}  // namespace hipgrad
