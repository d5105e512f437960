/// @file matrix_kernel.hpp
/// @brief The matrix tile GEMM kernels (one product split over K, or the sub-problems of a
///        grouped launch): per block the wgmma mainloop where the sm_90a pass runs the
///        configuration, else the mma.sync / MFMA mainloop.
///
/// Blocks are numbered along M in groups of kGroupM tile rows, so that consecutive blocks share
/// their B tiles and a few A tiles in the L2; split z covers K tiles
/// [z·k_tiles_per_split, (z + 1)·k_tiles_per_split).
#pragma once

#include <cstdint>
#include <type_traits>

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/collective/matrix_mainloop.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/kernel/tile_scheduler.hpp"

namespace hipgrad::gemm {

/// Threads of a matrix-kernel block for Config Cfg on this backend.
template <typename Cfg>
constexpr int matrix_kernel_threads() {
  return Cfg::kWarps * kMatrixAtomLanes;
}

namespace detail {

/// One block of the matrix tile GEMM: `w` of the product of a and b, on the wgmma mainloop where
/// it runs the loaders (sm_90a), else on the matrix atoms; traps where there are none.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
HIPGRAD_DEVICE HIPGRAD_INLINE void matrix_block(const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                                const TileWork& w) {
  using Atom = typename MatrixAtomFor<typename LoaderA::Element>::type;
  static_assert(std::is_same_v<typename LoaderA::Element, typename LoaderB::Element>, "A and B must share a type");
  if constexpr (Atom::kAvailable) {
    static_assert(Atom::kLanes == kMatrixAtomLanes, "the atom's lanes differ from the backend's");
    extern __shared__ uint4 gemm_shared[];  // uint4: 16-byte alignment for the chunk copies
    char* shared = reinterpret_cast<char*>(gemm_shared);
    shared += (Cfg::kSharedAlignment - reinterpret_cast<std::uintptr_t>(shared) % Cfg::kSharedAlignment) %
              Cfg::kSharedAlignment;
#if defined(HIPGRAD_GEMM_WGMMA)
    if constexpr (WgmmaPlan<Cfg, LoaderA, LoaderB>::kSupported) {
      WgmmaMainloop<Cfg, LoaderA, LoaderB, Epilogue>::run(shared, a, b, epilogue, w);
      return;
    }
#endif
    MatrixMainloop<Cfg, Atom, LoaderA, LoaderB, Epilogue>::run(shared, a, b, epilogue, w);
  } else {
    __builtin_trap();
  }
}

}  // namespace detail

/// The matrix tile GEMM: one block per (block tile, K split); grid (tiles_m·tiles_n, 1, splits),
/// matrix_kernel_threads<Cfg>() threads, Cfg::shared_bytes<T>() of dynamic shared memory. Only
/// for devices where device_has_matrix_atoms(): in other device passes the body traps.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(matrix_kernel_threads<Cfg>())
    mma_tile_gemm(LoaderA a, LoaderB b, Epilogue epilogue, int k_tiles_per_split) {
  detail::matrix_block<Cfg>(a, b, epilogue, block_tile_work<Cfg>(a, b, k_tiles_per_split));
}

/// The matrix tile GEMM over the sub-problems of a grouped launch: one block per work item
/// (grid problems.items), no K split; threads and shared memory as mma_tile_gemm's.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue, bool kInParameters>
__global__ void __launch_bounds__(matrix_kernel_threads<Cfg>())
    grouped_mma_tile_gemm(const HIPGRAD_GRID_CONSTANT GroupedProblems<LoaderA, LoaderB, Epilogue> problems) {
  GroupedSchedule<Cfg, LoaderA, LoaderB, Epilogue, kInParameters>(problems).visit(
      static_cast<int>(blockIdx.x), [](const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                       const TileWork& w) { detail::matrix_block<Cfg>(a, b, epilogue, w); });
}

}  // namespace hipgrad::gemm
