/// @file staged_plan.hpp
/// @brief Host-side planning of the staged channels-last kernels (staged_channels_last.hpp):
///        the band of groups, the cluster, the block size and the shared memory each block takes.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>

#include "hipgrad/ops/groupnorm/detail/launch_plan.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_channels_last.hpp"

namespace hipgrad::groupnorm::detail {

/// How much a staged block may stage, and with how many threads at most, in the order tried, as
/// measured on the H100 (docs/perf-notes.md, steps 13, 14 and 16): blocks that fit two to a
/// multiprocessor (≤ 100 KB of staging, and few enough threads for the kernel's registers: see
/// kStaged*PairThreads) ran best. Bands whose columns need more threads than that take a block
/// per multiprocessor; so does a unit too large for a cluster of 100 KB blocks, with up to 200 KB
/// each (in a cluster of 16 where 8 do not hold it).
struct StagedBudget {
  std::size_t bytes;
  Index most_threads;
};
inline constexpr StagedBudget kStagedForwardBudgets[] = {{100 * 1024, kStagedForwardPairThreads},
                                                         {100 * 1024, kStagedMaxThreads},
                                                         {200 * 1024, kStagedMaxThreads}};
inline constexpr StagedBudget kStagedBackwardBudgets[] = {{100 * 1024, kStagedBackwardPairThreads},
                                                          {200 * 1024, kStagedMaxThreads}};
/// The narrowest band row: 160-byte rows of whole sectors ran best for the forward, narrower
/// bands for the backward.
inline constexpr Index kStagedForwardRowBytes = 128, kStagedBackwardRowBytes = 64;
/// Shared memory the staged kernels declare statically (≤ 6.5 KB), kept free of the staging.
inline constexpr std::size_t kStagedStaticBytes = 16 * 1024;
/// Threads come in whole warps of this many lanes (NVIDIA 32, AMD up to 64).
#if defined(HIPGRAD_BACKEND_CUDA)
inline constexpr Index kStagedWarpGranule = 32;
#else
inline constexpr Index kStagedWarpGranule = 64;
#endif

struct StagedPlan {
  bool usable = false;
  OneReadRows rows;
  int slots = 0;
  unsigned threads = 0;
  Index units = 0;
  std::size_t shared_bytes = 0;  ///< dynamic shared memory per block

  int cluster() const { return rows.cluster; }
  Index blocks() const { return units * rows.cluster; }
};

/// "_staged_t<threads>_k<cluster>_band<groups>" for op names, "" when not usable.
inline std::string staged_name(const StagedPlan& plan) {
  if (!plan.usable) return "";
  return "_staged_t" + std::to_string(plan.threads) + "_k" + std::to_string(plan.cluster()) + "_band" +
         std::to_string(plan.rows.band_groups);
}

/// The device's staging budget per block: `most`, or less where a block's shared memory is smaller.
inline std::size_t staged_budget(std::size_t most) {
  int device = 0, block_bytes = 0;
  if (hipGetDevice(&device) != hipSuccess ||
      hipDeviceGetAttribute(&block_bytes, hipDeviceAttributeMaxSharedMemoryPerBlock, device) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  const auto available = static_cast<std::size_t>(block_bytes);
  const std::size_t staging = available > kStagedStaticBytes ? available - kStagedStaticBytes : 0;
  return staging < most ? staging : most;
}

/// Rows per step (threads = rows per step × columns, whole warps, at most `most`) that cover
/// `span` rows with the fewest padding slots, then the most threads; 0 if none.
inline Index staged_rows_per_step(Index columns, Index span, Index most) {
  const Index granule = columns / greatest_common_divisor(columns, kStagedWarpGranule) * kStagedWarpGranule;
  Index best = 0, best_padding = 0;
  for (Index threads = granule; threads <= most; threads += granule) {
    const Index step = threads / columns, padding = ceil_div(span, step) * step - span;
    if (best == 0 || padding <= best_padding) {
      best = step;
      best_padding = padding;
    }
  }
  return best;
}

/// Whether `kernel` runs in clusters of `cluster` blocks of `threads` with `bytes` of dynamic
/// shared memory on this GPU: always up to kPortableClusterBlocks (where clusters exist), above
/// that where the runtime finds room for one such cluster (opting the kernel in first).
template <typename... Params>
bool staged_cluster_fits(void (*kernel)(Params...), int cluster, unsigned threads, std::size_t bytes) {
  if (cluster <= kPortableClusterBlocks) return true;
  if (hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize,
                          static_cast<int>(bytes)) != hipSuccess ||
      allow_large_clusters(kernel) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return resident_clusters(kernel, threads, static_cast<unsigned>(cluster), bytes) > 0;
}

/// The staged plan of an op over x (and dy: `tensors` = 2) run by `kernel`, or an unusable one:
/// the first budget tier, then the smallest cluster, that holds a band.
template <typename T, typename... Params>
StagedPlan plan_staged(Algorithm algorithm, const Plan& pl, const TensorShape& x, Index groups, int tensors,
                       void (*kernel)(Params...)) {
  constexpr int V = kVector16<T>;
  StagedPlan plan;
  if (algorithm != Algorithm::kStaged && algorithm != Algorithm::kAuto) return plan;
  if (pl.path != Path::kChannelsLast || pl.vector != V) return plan;
  const Index group_channels = x.c() / groups;
  // The fewest adjacent groups of whole vectors whose row segment fills two sectors.
  const bool forward = tensors == 1;
  const Index min_row_bytes = forward ? kStagedForwardRowBytes : kStagedBackwardRowBytes;
  int band = 0;
  for (int b = 1; b <= kOneReadMaxBandGroups && b * group_channels <= kStagedMaxBandChannels; ++b) {
    if (groups % b != 0 || b * group_channels % V != 0) continue;
    band = b;
    if (b * group_channels * static_cast<Index>(sizeof(T)) >= min_row_bytes) break;
  }
  if (band == 0) return plan;
  OneReadRows m;
  m.columns = band * group_channels / V;
  m.group_columns = m.columns / band;  // unused: a vector may hold channels of two groups
  m.positions = x.spatial_size();
  m.band_groups = band;
  // A channel's partial sums: Σ(x − shift), Σ(x − shift)², count (forward); Σdz, Σdz·(x − μ).
  const std::size_t exchanged_bytes = forward ? sizeof(Array<float, 3>) : sizeof(GradientSums);
  const int most_blocks = cluster_launch_supported() ? kLargestClusterBlocks : 1;
  const StagedBudget* tiers = forward ? kStagedForwardBudgets : kStagedBackwardBudgets;
  const std::size_t tier_count = forward ? std::size(kStagedForwardBudgets) : std::size(kStagedBackwardBudgets);
  for (std::size_t t = 0; t < tier_count && !plan.usable; ++t) {
    const StagedBudget& tier = tiers[t];
    const std::size_t budget = staged_budget(tier.bytes);
    for (int cluster = 1; cluster <= most_blocks && !plan.usable; cluster *= 2) {
      m.cluster = cluster;
      m.span = ceil_div(m.positions, Index{cluster});
      if (m.span * (cluster - 1) >= m.positions) break;  // a block with nothing to do
      m.rows_per_step = staged_rows_per_step(m.columns, m.span, tier.most_threads);
      if (m.rows_per_step == 0) break;
      const Index slots = ceil_div(m.span, m.rows_per_step), threads = m.rows_per_step * m.columns;
      // The staging, then the cluster's exchange of per-channel partials (send_column_totals).
      const std::size_t bytes = static_cast<std::size_t>(slots * threads) * 16 * static_cast<std::size_t>(tensors) +
                                static_cast<std::size_t>(cluster * m.columns * V) * exchanged_bytes;
      if (bytes > budget || !staged_cluster_fits(kernel, cluster, static_cast<unsigned>(threads), bytes)) continue;
      plan.usable = true;
      plan.rows = m;
      plan.slots = static_cast<int>(slots);
      plan.threads = static_cast<unsigned>(threads);
      plan.shared_bytes = bytes;
    }
  }
  plan.units = x.n() * (groups / band);
  plan.usable = plan.usable && plan.blocks() <= 2147483647;  // a 1-D grid
  // kAuto takes it where the grid has a block for every multiprocessor: with fewer, the register
  // one-read kernels, which spread a unit over more threads, ran faster (step 14).
  if (algorithm == Algorithm::kAuto && plan.blocks() < Index{multiprocessors()}) plan.usable = false;
  return plan;
}

/// not_supported when kStaged was asked for and cannot be had.
inline Status check_staged(Algorithm algorithm, const StagedPlan& plan) {
  if (algorithm == Algorithm::kStaged && !plan.usable)
    return Status::not_supported(
        "the staged algorithm needs packed channels last (NHWC and kin) with 16-byte aligned pointers, channels and a "
        "band of adjacent groups in whole 16-byte vectors, and a band small enough for the shared memory of one block, "
        "or of a cluster of up to " +
        std::to_string(kPortableClusterBlocks) + " blocks where the GPU has clusters (" +
        std::to_string(kLargestClusterBlocks) + " where it has room for them)");
  return Status::ok();
}

/// Launches `kernel` (a staged kernel) for `plan`, after opting in to its shared memory.
template <typename... Params, typename... Args>
Status launch_staged(void (*kernel)(Params...), const StagedPlan& plan, hipStream_t stream, Args&&... args) {
  hipError_t e = hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(plan.shared_bytes));
  if (e == hipSuccess && plan.cluster() > kPortableClusterBlocks) e = allow_large_clusters(kernel);
  if (e == hipSuccess)
    e = launch_clustered_with_shared(kernel, static_cast<unsigned>(plan.blocks()), plan.threads,
                                     static_cast<unsigned>(plan.cluster()), plan.shared_bytes, stream,
                                     std::forward<Args>(args)...);
  return status_from_hip(e, "launch of a staged GroupNorm kernel", __FILE__, __LINE__);
}

}  // namespace hipgrad::groupnorm::detail
