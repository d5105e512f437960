/// @file simt_kernel.hpp
/// @brief The SIMT tile GEMM kernels (one product split over K, or the sub-problems of a grouped
///        launch) over the SIMT mainloop.
#pragma once

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/collective/simt_mainloop.hpp"
#include "hipgrad/gemm/config.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/kernel/tile_scheduler.hpp"

namespace hipgrad::gemm {

/// The SIMT tile GEMM: 128 × 128 block tiles, 256 threads each computing two 4 × 4 blocks in
/// each dimension (rows 4·ty.. and 64 + 4·ty..: float4 shared reads, broadcast across the warp).
/// Global loads of tile t + 1 go to registers while tile t is computed from shared memory, then
/// to the other shared buffer: one barrier per tile. `vectors`: every 4-element vector of A and
/// B is aligned (loaders' vectors_aligned(4)).
template <typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(SimtConfig::kThreads)
    simt_tile_gemm(LoaderA a, LoaderB b, Epilogue epilogue, int k_tiles_per_split, bool vectors) {
  detail::simt_block(a, b, epilogue, block_tile_work<SimtConfig>(a, b, k_tiles_per_split), vectors);
}

/// The SIMT tile GEMM over the sub-problems of a grouped launch: one block per work item (grid
/// problems.items), no K split.
template <typename LoaderA, typename LoaderB, typename Epilogue, bool kInParameters>
__global__ void __launch_bounds__(SimtConfig::kThreads)
    grouped_simt_tile_gemm(const HIPGRAD_GRID_CONSTANT GroupedProblems<LoaderA, LoaderB, Epilogue> problems,
                           bool vectors) {
  GroupedSchedule<SimtConfig, LoaderA, LoaderB, Epilogue, kInParameters>(problems).visit(
      static_cast<int>(blockIdx.x), [&](const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                        const TileWork& w) { detail::simt_block(a, b, epilogue, w, vectors); });
}

}  // namespace hipgrad::gemm
