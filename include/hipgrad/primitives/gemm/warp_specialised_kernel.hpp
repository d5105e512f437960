/// @file warp_specialised_kernel.hpp
/// @brief The warp-specialised, persistent tile GEMM kernel of sm_90a with either producer: TMA
///        copies of tensor-mapped operands (tma_mainloop.hpp) or cp.async copies through any
///        operand loader (gather_mainloop.hpp).
#pragma once

#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/primitives/gemm/gather_mainloop.hpp"
#include "hipgrad/primitives/gemm/grouped_tiles.hpp"
#include "hipgrad/primitives/gemm/tma_mainloop.hpp"

namespace hipgrad::gemm {

/// Which producer fills the warp-specialised kernel's stages.
enum class StageProducer {
  kTma,     ///< tensor-map copies (TmaOperand operands)
  kGather,  ///< cp.async through operand loaders
};

#if defined(HIPGRAD_BACKEND_CUDA)

/// The warp-specialised tile GEMM (sm_90a): a persistent grid of at most one block per
/// multiprocessor walking tiles_m·tiles_n·splits work items, tma_kernel_threads<Cfg>() threads,
/// tma_kernel_shared_bytes<Cfg, T>() (gather: gather_kernel_shared_bytes) of dynamic shared memory. Only for devices where
/// device_runs_wgmma() and for configurations tma_kernel_supported (gather_kernel_supported):
/// elsewhere the body traps.
template <typename Cfg, StageProducer kProducer, typename OperandA, typename OperandB, typename Epilogue>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    warp_specialised_tile_gemm(const __grid_constant__ OperandA a, const __grid_constant__ OperandB b,
                               Epilogue epilogue, int k_tiles_per_split, int splits) {
#if defined(HIPGRAD_GEMM_TMA)
  constexpr bool kTma = kProducer == StageProducer::kTma;
  if constexpr (kTma ? tma_kernel_supported<Cfg, OperandA, OperandB>()
                     : gather_kernel_supported<Cfg, OperandA, OperandB>()) {
    using Mainloop = std::conditional_t<kTma, detail::TmaMainloop<Cfg, OperandA, OperandB, Epilogue>,
                                        detail::GatherMainloop<Cfg, OperandA, OperandB, Epilogue>>;
    detail::run_warp_specialised<Mainloop, Cfg>(a, b, epilogue, k_tiles_per_split, splits);
    return;
  }
#endif
  (void)a, (void)b, (void)epilogue, (void)k_tiles_per_split, (void)splits;
  __trap();
}

/// The gather kernel over the sub-problems of a grouped launch (grouped_tiles.hpp): the same
/// persistent grid, threads and shared memory (gather_kernel_shared_bytes) as
/// warp_specialised_tile_gemm's gather kernel, walking problems.items work items, no K split.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    grouped_gather_tile_gemm(const GroupedProblems<LoaderA, LoaderB, Epilogue> problems) {
#if defined(HIPGRAD_GEMM_TMA)
  if constexpr (gather_kernel_supported<Cfg, LoaderA, LoaderB>()) {
    using Mainloop = detail::GatherMainloop<Cfg, LoaderA, LoaderB, Epilogue>;
    Mainloop::run(detail::aligned_kernel_shared<Cfg>(), GroupedSchedule<Cfg, LoaderA, LoaderB, Epilogue>(problems));
    return;
  }
#endif
  (void)problems;
  __trap();
}

#endif  // HIPGRAD_BACKEND_CUDA

}  // namespace hipgrad::gemm
