/// @file box_producer.hpp
/// @brief The box producer of the warp-specialised kernel, for operands that copy their own
///        tiles by TMA from maps of up to five dimensions (a convolution's operands, box by box):
///        per K tile one producer warp announces the stage's bytes, and its lanes issue the
///        operands' copies, one each.
///
/// A box operand has Element, kKContiguous, mn_size() and k_size() as a loader has, and
///   const void* map;                          // its CUtensorMap, in device memory, written
///                                             // before the launch (the producer acquires it)
///   int tile_bytes() const;                   // what its copies of one tile bring
///   int copies() const;                       // copies a tile (A's and B's together ≤ 32)
///   void load_copy(int i, char* tile, int mn_base, int k_base, std::uint64_t* barrier) const;
///                                             // device: copy i of the tile
/// Copies count whole boxes whatever part lies outside the tensor (zero-filled), so the stage's
/// barrier expects the same bytes for every K tile.
///
/// TF32 wgmma reads B K-major only; a B whose copies bring it MN-major (32-bit panels of BK = 32
/// positions) declares kKContiguous (what the consumers read) and kTransposedOnArrival: its
/// copies complete a barrier of their own, the producer's other three warps turn each landed
/// panel K-major in place (panel_transpose.hpp, rounding to TF32 on the way), fence their writes
/// for wgmma's proxy and then arrive on the stage's full barrier.
#pragma once

#include <cstdint>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/gemm/arch/panel_transpose.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/producer_contract.hpp"
#include "hipgrad/gemm/collective/warp_specialised_consumer.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"

namespace hipgrad::gemm {

/// Whether box operand O's copies land MN-major for the producer to turn K-major (O declares
/// kTransposedOnArrival; others never are).
template <typename O, typename = void>
struct TransposedOnArrival : std::false_type {};
template <typename O>
struct TransposedOnArrival<O, std::void_t<decltype(O::kTransposedOnArrival)>>
    : std::bool_constant<O::kTransposedOnArrival> {};

/// Dynamic shared memory of the box kernel: the TMA kernel's, and where B is transposed on
/// arrival a barrier a stage for its copies.
template <typename Cfg, typename OperandA, typename OperandB>
constexpr int box_kernel_shared_bytes() {
  return tma_kernel_shared_bytes<Cfg, typename OperandA::Element>() +
         (TransposedOnArrival<OperandB>::value ? 8 * Cfg::kStages : 0);
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

template <typename Cfg, typename OperandA, typename OperandB>
struct BoxTmaProducer {
  static constexpr bool kTranspose = TransposedOnArrival<OperandB>::value;
  static_assert(!TransposedOnArrival<OperandA>::value, "only B is transposed on arrival (A may come from registers)");
  static constexpr int kTransposeWarps = 3;
  /// Registers the producer warpgroup keeps: the copy lanes work out 3-D coordinates (40 spilled
  /// there), the transposing warps hold two 4 × 4 blocks and their addresses.
  static constexpr int kRegisters = kTranspose ? 96 : 56;
  static constexpr int kArrivals = 1 + (kTranspose ? kTransposeWarps : 0);
  static constexpr bool kFenceStages = false;
  static constexpr int kSharedBytes = kTranspose ? 8 * Cfg::kStages : 0;
  static constexpr int kProducerBarrier = 1;
  using Plan = WgmmaPlan<Cfg, OperandA, OperandB>;
  static_assert(!kTranspose || (sizeof(typename OperandB::Element) == 4 && Cfg::kBlockK == 32 &&
                                Plan::TileB::kKContiguous && Cfg::kBlockN % 32 == 0),
                "a B transposed on arrival is 32-bit panels of 32 positions");

  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    auto* landed = reinterpret_cast<std::uint64_t*>(ring.extra);
    if constexpr (kTranspose) {
      if (thread == 0) {
        for (int s = 0; s < Cfg::kStages; ++s) mbarrier_init(&landed[s], 1);
        mbarrier_init_fence();
      }
      named_barrier_sync(kProducerBarrier, 128);
      if (thread >= 32) return transpose(ring, landed, schedule, thread - 32);
    }
    if (thread < 32) copy(ring, landed, schedule, thread);
  }

  /// One warp: lane i issues copy i of the stage (A's, then B's), so that the copies'
  /// coordinates (divisions by the boxes' grid) are worked out side by side rather than one
  /// after another by one thread. A copy may land before lane 0's arrival announces its bytes:
  /// the barrier's phase cannot complete before that arrival.
  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void copy(const Ring& ring, std::uint64_t* landed, const Schedule& schedule, int lane) {
    int bytes_a = 0, bytes_b = 0;
    for_each_free_stage<Cfg>(
        ring, schedule,
        [&](const OperandA& a, const OperandB& b, int, int) {
          tma_acquire_map(static_cast<const CUtensorMap*>(a.map));
          tma_acquire_map(static_cast<const CUtensorMap*>(b.map));
          bytes_a = a.tile_bytes(), bytes_b = b.tile_bytes();
        },
        [&](const OperandA& a, const OperandB& b, int s, int m_base, int n_base, int k) {
          std::uint64_t* barrier_b = kTranspose ? &landed[s] : &ring.full[s];
          if (lane == 0) {
            if constexpr (kTranspose) {
              mbarrier_arrive_expect_bytes(&ring.full[s], bytes_a);
              mbarrier_arrive_expect_bytes(barrier_b, bytes_b);
            } else {
              mbarrier_arrive_expect_bytes(&ring.full[s], bytes_a + bytes_b);
            }
          }
          const int copies_a = a.copies();
          if (lane < copies_a) {
            a.load_copy(lane, ring.stage(s), m_base, k, &ring.full[s]);
          } else if (lane < copies_a + b.copies()) {
            b.load_copy(lane - copies_a, ring.stage(s) + Plan::TileA::kBytes, n_base, k, barrier_b);
          }
        });
  }

  /// Warps 1–3: per K tile, once B's copies land, each thread takes panel tasks in turn; its
  /// writes are fenced for wgmma's (asynchronous) proxy before its warp arrives on full[s].
  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void transpose(const Ring& ring, std::uint64_t* landed, const Schedule& schedule, int thread) {
    constexpr int kThreads = 32 * kTransposeWarps;
    constexpr int kTasks = Cfg::kBlockN / 32 * kPanelTransposeTasks;
    for_each_stage<Cfg>(
        schedule, [](const OperandA&, const OperandB&, int, int) {},
        [&](const OperandA&, const OperandB&, int s, std::uint32_t pass, int, int, int) {
          mbarrier_wait(&landed[s], pass);
          char* tile = ring.stage(s) + Plan::TileA::kBytes;
          for (int task = thread; task < kTasks; task += kThreads) {
            transpose_panel_task(tile + task / kPanelTransposeTasks * TransposedPanel::kBytes,
                                 task % kPanelTransposeTasks, [](std::uint32_t bits) { return to_tf32(bits); });
          }
          fence_shared_for_async_proxy();
          __syncwarp();
          if (thread % 32 == 0) mbarrier_arrive(&ring.full[s]);
        });
  }
};

#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

}  // namespace hipgrad::gemm
