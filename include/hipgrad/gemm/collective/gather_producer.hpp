/// @file gather_producer.hpp
/// @brief The gather producer of the warp-specialised kernel, for operands read through any
///        operand loader (a convolution's implicit im2col, a dense matrix): its warpgroup fills
///        each stage of the TMA kernel's ring by cp.async of 16-byte vectors, for the same
///        consumer warpgroups (warp_specialised_consumer.hpp).
///
/// Why: the cp.async wgmma mainloop (wgmma_mainloop.hpp) makes every thread copy and ends every
/// K tile in a block barrier, so the consumers' wgmma stream stops at each tile. Here the copies
/// are the producer warpgroup's alone: each of its 128 threads copies its chunks of the stage and
/// arrives on the stage's full barrier when they land (cp.async.mbarrier.arrive.noinc), so the
/// barrier completes once all 128 threads' copies are in, without the producer waiting for them.
/// The consumers fence each landed stage for the asynchronous proxy (cp.async writes through the
/// generic proxy, wgmma reads through the asynchronous one) before their wgmmas read it.
///
/// The producer has few registers and issues every copy itself, so a chunk's index arithmetic is
/// split by what it depends on (the loaders' mn_state / k_state): thread t copies chunk t mod P
/// of every (128 / P)-th row (P chunks a row), so all its chunks of an operand share one column
/// and that column's state is made once per K tile (K-contiguous tiles, whose columns are k) or
/// once per work item (MN-contiguous tiles). The rows of a K-contiguous tile are the tile's mn,
/// whose states the producer writes to a table in shared memory once per work item; those of an
/// MN-contiguous tile are k, whose state is advanced from row to row (advance_k).
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/collective/producer_contract.hpp"
#include "hipgrad/gemm/collective/tile_copy.hpp"
#include "hipgrad/gemm/collective/warp_specialised_consumer.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"

namespace hipgrad::gemm {

namespace detail {

/// How the 128 producer threads share one operand tile: P chunks a row, a thread's chunks
/// (128 / P) rows apart.
template <typename Tile>
struct GatherSplit {
  static constexpr int kChunksPerRow = Tile::Layout::kChunks;
  static constexpr int kRowStep = 128 / kChunksPerRow;
  static constexpr int kChunksPerThread = kRowStep > 0 ? Tile::kRows / kRowStep : 0;
  static constexpr bool kSupported = kRowStep > 0 && 128 % kChunksPerRow == 0 && Tile::kRows % kRowStep == 0;
};

/// Shared-memory bytes of a tile's table of row states: the mn states of a K-contiguous tile
/// (16-byte aligned), none for an MN-contiguous one.
template <typename Tile, typename Loader>
constexpr int gather_table_bytes() {
  return Tile::kKContiguous ? round_up(Tile::kRows * static_cast<int>(sizeof(typename Loader::MnState)), 16) : 0;
}

}  // namespace detail

/// Whether the gather kernel runs Config Cfg with loaders A, B: what the TMA kernel's consumers
/// run (tma_kernel_supported), for loaders of 16-byte aligned vectors whose tiles the producer
/// threads share evenly.
template <typename Cfg, typename LoaderA, typename LoaderB>
HIPGRAD_HOST_DEVICE constexpr bool gather_kernel_supported() {
  if constexpr (tma_kernel_supported<Cfg, LoaderA, LoaderB>()) {
    using Plan = WgmmaPlan<Cfg, LoaderA, LoaderB>;
    return detail::GatherSplit<typename Plan::TileA>::kSupported &&
           detail::GatherSplit<typename Plan::TileB>::kSupported;
  } else {
    return false;
  }
}

/// Dynamic shared memory of the gather kernel: the TMA kernel's, and the producer's row tables.
template <typename Cfg, typename LoaderA, typename LoaderB>
constexpr int gather_kernel_shared_bytes() {
  using T = typename LoaderA::Element;
  using Plan = WgmmaPlan<Cfg, LoaderA, LoaderB>;
  return tma_kernel_shared_bytes<Cfg, T>() + detail::gather_table_bytes<typename Plan::TileA, LoaderA>() +
         detail::gather_table_bytes<typename Plan::TileB, LoaderB>();
}

namespace detail {

#if defined(HIPGRAD_GEMM_TMA)

/// One operand's share of the producer's copies (see the file comment).
template <typename Tile, typename Loader>
struct GatherOperand {
  using T = typename Loader::Element;
  using MnState = typename Loader::MnState;
  using Split = GatherSplit<Tile>;
  static constexpr int kTableBytes = gather_table_bytes<Tile, Loader>();

  /// At a work item's start: a K-contiguous tile's row table (rows thread, thread + 128, …),
  /// else the state of the thread's column (its mn). The table is the producer's alone; the
  /// caller brackets this with producer barriers.
  HIPGRAD_DEVICE HIPGRAD_INLINE static MnState start_item(MnState* table, const Loader& loader, int mn_base,
                                                          int thread) {
    if constexpr (Tile::kKContiguous) {
      for (int row = thread; row < Tile::kRows; row += 128) table[row] = loader.mn_state(mn_base + row);
      return MnState{};
    } else {
      return loader.mn_state(mn_base + (thread % Split::kChunksPerRow) * Tile::kChunkElements);
    }
  }

  /// The thread's chunks of the tile at k_base, every one by cp.async (zero-filled ones too, so
  /// that the thread's arrival covers them). kWhole: the loader's vectors are whole or absent
  /// (loader_whole_vectors), so a chunk is copied or zeroed by a predicate.
  template <bool kWhole>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void copy(char* tile, const MnState* table, const MnState& column,
                                                 const Loader& loader, int k_base, int thread) {
    const int chunk = thread % Split::kChunksPerRow, first_row = thread / Split::kChunksPerRow;
    if constexpr (Tile::kKContiguous) {
      (void)column;
      const typename Loader::KState k = loader.k_state(k_base + chunk * Tile::kChunkElements);
      // The row states of a batch are read before its copies: a table read after a cp.async
      // waits for it (both are shared-memory accesses the compiler keeps in order), so one
      // read per copy would serialise every copy behind a shared-memory round trip.
#pragma unroll 1
      for (int i0 = 0; i0 < Split::kChunksPerThread; i0 += kBatch) {
        MnState rows[kBatch];
        HIPGRAD_UNROLL
        for (int i = 0; i < kBatch; ++i) rows[i] = table[first_row + (i0 + i) * Split::kRowStep];
        HIPGRAD_UNROLL
        for (int i = 0; i < kBatch; ++i) {
          const int row = first_row + (i0 + i) * Split::kRowStep;
          put<kWhole>(tile + Tile::Layout::chunk_offset(row, chunk), loader.vector(rows[i], k, Tile::kChunkElements));
        }
      }
    } else {
      (void)table;
      typename Loader::KState k = loader.k_state(k_base + first_row);
#pragma unroll 4
      for (int i = 0; i < Split::kChunksPerThread; ++i) {
        const int row = first_row + i * Split::kRowStep;
        put<kWhole>(tile + Tile::Layout::chunk_offset(row, chunk), loader.vector(column, k, Tile::kChunkElements));
        loader.advance_k(k, Split::kRowStep);
      }
    }
  }

 private:
  /// Row states read ahead of a batch's copies: 4 where they are small, else 2 (the producer's
  /// registers are few).
  static constexpr int kBatchWanted = sizeof(MnState) <= 16 ? 4 : 2;
  static constexpr int kBatch = Split::kChunksPerThread % kBatchWanted == 0 ? kBatchWanted : 1;

  template <bool kWhole>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void put(char* destination, const VectorSource<T>& source) {
    if constexpr (kWhole) {
      copy_whole_chunk_async(destination, source.pointer, source.valid != 0);
    } else {
      copy_chunk_async(destination, source.pointer, source.valid * static_cast<int>(sizeof(T)));
    }
  }
};

/// The gather producer: its warpgroup's 128 threads make each work item's row states, then per K
/// tile wait for a free stage, copy their chunks of both tiles and arrive on the full barrier
/// once those land.
template <typename Cfg, typename LoaderA, typename LoaderB>
struct GatherProducer {
  /// As the TMA producer's: the copies run in short loops (GatherOperand::copy), so 40 registers
  /// hold them, and the consumers keep the most.
  static constexpr int kRegisters = 40;
  static constexpr int kArrivals = 128;
  static constexpr bool kFenceStages = true;
  using Plan = WgmmaPlan<Cfg, LoaderA, LoaderB>;
  using CopyA = GatherOperand<typename Plan::TileA, LoaderA>;
  using CopyB = GatherOperand<typename Plan::TileB, LoaderB>;
  static constexpr int kSharedBytes = CopyA::kTableBytes + CopyB::kTableBytes;
  static constexpr bool kTables = kSharedBytes > 0;
  /// The producer warpgroup's own hardware barrier (the block's is 0).
  static constexpr int kProducerBarrier = 1;

  template <typename Ring, typename Schedule>
  HIPGRAD_DEVICE static void produce(const Ring& ring, const Schedule& schedule, int thread) {
    auto* table_a = reinterpret_cast<typename LoaderA::MnState*>(ring.extra);
    auto* table_b = reinterpret_cast<typename LoaderB::MnState*>(ring.extra + CopyA::kTableBytes);
    typename LoaderA::MnState column_a{};
    typename LoaderB::MnState column_b{};
    bool whole_a = false, whole_b = false;
    for_each_free_stage<Cfg>(
        ring, schedule,
        [&](const LoaderA& a, const LoaderB& b, int m_base, int n_base) {
          // Every thread is done with the last item's tables before they are rewritten, and sees
          // the new ones before its first copy.
          if constexpr (kTables) named_barrier_sync(kProducerBarrier, 128);
          column_a = CopyA::start_item(table_a, a, m_base, thread);
          column_b = CopyB::start_item(table_b, b, n_base, thread);
          whole_a = loader_whole_vectors(a, Plan::TileA::kChunkElements);
          whole_b = loader_whole_vectors(b, Plan::TileB::kChunkElements);
          if constexpr (kTables) named_barrier_sync(kProducerBarrier, 128);
        },
        [&](const LoaderA& a, const LoaderB& b, int s, int, int, int k) {
          char* stage = ring.stage(s);
          // Uniform over the launch's work items of one sub-problem: no divergence.
          if (whole_a) {
            CopyA::template copy<true>(stage, table_a, column_a, a, k, thread);
          } else {
            CopyA::template copy<false>(stage, table_a, column_a, a, k, thread);
          }
          if (whole_b) {
            CopyB::template copy<true>(stage + Plan::TileA::kBytes, table_b, column_b, b, k, thread);
          } else {
            CopyB::template copy<false>(stage + Plan::TileA::kBytes, table_b, column_b, b, k, thread);
          }
          mbarrier_arrive_when_copies_land(&ring.full[s]);
        });
    // Copies still in flight when the thread exits complete all the same: the consumers wait
    // for the barriers they arrive on.
  }
};


#endif  // HIPGRAD_GEMM_TMA

}  // namespace detail

}  // namespace hipgrad::gemm
