/// @file block_reduce.hpp
/// @brief Block-wide reductions over a 1-D block of `BlockThreads` threads, backed by CUB on
///        NVIDIA and rocPRIM on AMD.
///
///   using Reduce = hipgrad::BlockReduce<float, 256>;
///   __shared__ Reduce::TempStorage storage;
///   float total = Reduce(storage).all_sum(partial);   // every thread gets the total
///
/// The kernel must be launched with blockDim = (BlockThreads, 1, 1) and every thread must call.
/// all_reduce() ends with a barrier, so its storage may be reused at once; after reduce(), put a
/// block_sync() before the storage is used again. For a fixed
/// BlockThreads the combination order is fixed: results are bitwise reproducible run to run.
#pragma once

#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/primitives/reduce_ops.hpp"

#if defined(HIPGRAD_BACKEND_CUDA)
#include <cub/block/block_reduce.cuh>
#else
#include <rocprim/block/block_reduce.hpp>
#endif

namespace hipgrad {

template <typename T, int BlockThreads>
class BlockReduce : public ReductionShortcuts<BlockReduce<T, BlockThreads>, T> {
  static_assert(BlockThreads > 0 && BlockThreads <= 1024, "BlockReduce: BlockThreads must be in [1, 1024]");

#if defined(HIPGRAD_BACKEND_CUDA)
  using Impl = cub::BlockReduce<T, BlockThreads>;
  using ImplStorage = typename Impl::TempStorage;
#else
  using Impl = rocprim::block_reduce<T, static_cast<unsigned>(BlockThreads)>;
  using ImplStorage = typename Impl::storage_type;
#endif

 public:
  struct TempStorage {
    ImplStorage impl;
    T broadcast;  // thread 0's result, for all_reduce
  };

  HIPGRAD_DEVICE explicit BlockReduce(TempStorage& storage) : storage_(storage) {}

  /// The reduction of every thread's `value`; valid in thread 0 only.
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

  /// The reduction, returned to every thread (one more barrier than reduce()).
  template <typename Op>
  HIPGRAD_DEVICE HIPGRAD_INLINE T all_reduce(const T& value, Op op) {
    const T result = reduce(value, op);
    if (threadIdx.x == 0) storage_.broadcast = result;
    block_sync();
    return storage_.broadcast;
  }

 private:
  TempStorage& storage_;
};

}  // namespace hipgrad
