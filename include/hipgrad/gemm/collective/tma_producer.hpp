/// @file tma_producer.hpp
/// @brief The TMA producer of the warp-specialised kernel and the operands it copies: a dense
///        operand with its 2-D tensor map (TmaOperand, built on the host by make_tma_operand in
///        device/tensor_map.hpp) and the copy of one tile of it, one box per 128-byte panel.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/collective/producer_contract.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"

namespace hipgrad::gemm {

#if defined(HIPGRAD_GEMM_TENSOR_MAPS)

/// A dense operand (row- or column-major, see DenseOperand) with a tensor map for TMA copies of
/// Tile-shaped boxes. Passed to kernels as a __grid_constant__ parameter: TMA reads the map from
/// the kernel's parameter space.
template <typename T, bool kKContiguous_>
struct TmaOperand {
  using Element = T;
  using Dense = DenseOperand<T, kKContiguous_>;
  static constexpr bool kKContiguous = kKContiguous_;

  CUtensorMap map;
  Dense dense;

  HIPGRAD_HOST_DEVICE int mn_size() const { return dense.mn_size(); }
  HIPGRAD_HOST_DEVICE int k_size() const { return dense.k_size(); }
};

#endif  // HIPGRAD_GEMM_TENSOR_MAPS

/// The TMA form of an operand loader: `type` (with a tensor map, built by make_tma_operand) where
/// kAvailable. Only dense operands have one, in the CUDA backend; gathered loaders (implicit
/// im2col) have none and take the cp.async mainloops.
template <typename Loader>
struct TmaOperandOf {
  static constexpr bool kAvailable = false;
};
#if defined(HIPGRAD_GEMM_TENSOR_MAPS)
template <typename T, bool kKContiguous>
struct TmaOperandOf<DenseOperand<T, kKContiguous>> {
  static constexpr bool kAvailable = true;
  using type = TmaOperand<T, kKContiguous>;
};
#endif

#if defined(HIPGRAD_GEMM_TMA)

/// Copies the Tile-shaped stage of operand `op` at (mn_base, k_base): one box per 128-byte panel.
template <typename Tile, typename T, bool kKContiguous>
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_load_tile(char* tile, const TmaOperand<T, kKContiguous>& op, int mn_base,
                                                 int k_base, std::uint64_t* barrier) {
  using L = typename Tile::Layout;
  constexpr int kPanels = L::kRowBytes / L::kPanelRowBytes;
  constexpr int kPanelElements = L::kPanelRowBytes / static_cast<int>(sizeof(T));
  const int inner = kKContiguous ? k_base : mn_base, outer = kKContiguous ? mn_base : k_base;
  HIPGRAD_UNROLL
  for (int p = 0; p < kPanels; ++p)
    tma_load_box(tile + p * L::kPanelBytes, &op.map, inner + p * kPanelElements, outer, barrier);
}

#endif  // HIPGRAD_GEMM_TMA

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// The TMA producer: one thread per K tile waits for the stage to be free, announces its bytes
/// and starts the two tensor-map copies, which complete the full barrier themselves.
template <typename Cfg, typename OperandA, typename OperandB>
struct TmaProducer {
  static constexpr int kRegisters = 40;
  static constexpr int kArrivals = 1;
  static constexpr bool kFenceStages = false;
  static constexpr int kSharedBytes = 0;
  using Plan = WgmmaPlan<Cfg, OperandA, OperandB>;
  using TileA = typename Plan::TileA;
  using TileB = typename Plan::TileB;

  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    if (thread != 0) return;
    tma_prefetch_map(&schedule.a.map);
    tma_prefetch_map(&schedule.b.map);
    for_each_free_stage<Cfg>(
        ring, schedule, [](const OperandA&, const OperandB&, int, int) {},
        [&](const OperandA& a, const OperandB& b, int s, int m_base, int n_base, int k) {
          mbarrier_arrive_expect_bytes(&ring.full[s], TileA::kBytes + TileB::kBytes);
          tma_load_tile<TileA>(ring.stage(s), a, m_base, k, &ring.full[s]);
          tma_load_tile<TileB>(ring.stage(s) + TileA::kBytes, b, n_base, k, &ring.full[s]);
        });
  }
};

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

}  // namespace hipgrad::gemm
