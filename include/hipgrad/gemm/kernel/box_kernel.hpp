/// @file box_kernel.hpp
/// @brief The warp-specialised kernel over grouped sub-problems of box operands (a
///        convolution's operands, copied box by box by TMA): the box producer
///        (collective/box_producer.hpp) and the TMA kernel's consumers.
#pragma once

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/box_producer.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/kernel/warp_specialised_kernel.hpp"

namespace hipgrad::gemm {

#if defined(HIPGRAD_GEMM_TENSOR_MAPS)

/// The warp-specialised kernel over grouped sub-problems of box operands: the persistent grid and
/// threads of the TMA kernel, box_kernel_shared_bytes of shared memory, no K split.
template <typename Cfg, typename OperandA, typename OperandB, typename Epilogue, bool kInParameters>
__global__ void __launch_bounds__(tma_kernel_threads<Cfg>(), 1)
    grouped_box_tile_gemm(const HIPGRAD_GRID_CONSTANT GroupedProblems<OperandA, OperandB, Epilogue> problems) {
#if defined(HIPGRAD_GEMM_TMA)
  if constexpr (tma_kernel_supported<Cfg, OperandA, OperandB>()) {
    using Mainloop = detail::WarpSpecialisedKernel<Cfg, OperandA, OperandB, Epilogue,
                                                   detail::BoxTmaProducer<Cfg, OperandA, OperandB>>;
    Mainloop::run(detail::aligned_kernel_shared<Cfg>(),
                  GroupedSchedule<Cfg, OperandA, OperandB, Epilogue, kInParameters>(problems));
    return;
  }
#endif
  (void)problems;
  __trap();
}

#endif  // HIPGRAD_GEMM_TENSOR_MAPS

}  // namespace hipgrad::gemm
