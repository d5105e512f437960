/// @file staged_plan.hpp
/// @brief Host-side planning of the staged channels-last kernels (staged_forward_kernels.hpp,
///        staged_backward_kernels.hpp): the band of groups, the cluster, the block size and the shared
///        memory each block takes.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>

#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/ops/groupnorm/detail/plan.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_backward_kernels.hpp"
#include "hipgrad/ops/groupnorm/detail/staged_forward_kernels.hpp"

namespace hipgrad::groupnorm::detail {

/// How much a staged block may take, and with how many threads at most, in the order tried:
/// blocks that fit two to a multiprocessor (half its shared memory each, and few enough threads
/// for the kernel's registers: see kStaged*PairThreads) measured fastest. Bands whose columns
/// need more threads than that take a block per multiprocessor; so does a unit too large for a cluster of such blocks, with up
/// to the device's limit each (staged_budget).
struct StagedBudget {
  bool pair;  ///< two blocks per multiprocessor (staged_pair_budget), else staged_budget
  Index most_threads;
};
inline constexpr StagedBudget kStagedForwardBudgets[] = {
    {true, kStagedForwardPairThreads}, {true, kStagedMaxThreads}, {false, kStagedMaxThreads}};
inline constexpr StagedBudget kStagedBackwardBudgets[] = {{true, kStagedBackwardPairThreads},
                                                          {false, kStagedMaxThreads}};
/// The backward meeting over groups (kStagedGroupMeeting) takes a multiprocessor per block:
/// clusters of such blocks ran faster than clusters of twice as many blocks two to a
/// multiprocessor.
inline constexpr StagedBudget kStagedBackwardGroupBudgets[] = {{false, kStagedMaxThreads}};
/// The narrowest band row where the unit fits: whole 128-byte lines. The backward's 80-byte bands
/// wrote half sectors from two clusters; with its meeting over groups, whole-sector bands ran
/// faster.
inline constexpr Index kStagedRowBytes = 128;
/// Threads come in whole warps of the widest target of the build (NVIDIA 32, AMD up to 64).
inline constexpr Index kStagedWarpGranule = kWidestWarpOfBuild;

/// The stagger of a staged grid's first wave (StagedStagger): grids of at least this many rounds,
/// phases this far apart. Both were tuned on one GPU: faster memory means shorter block lives,
/// which may want a shorter step.
inline constexpr Index kStaggerMinRounds = 4;
inline constexpr unsigned kStaggerStepNs = 3000;

struct StagedPlan {
  bool usable = false;
  OneReadRows rows;
  StagedLayout layout;  ///< the slots and the dynamic shared memory of a block
  StagedStagger stagger;
  unsigned threads = 0;
  Index units = 0;
  Index resident_clusters = 0;  ///< clusters of the plan's kernel the GPU holds at once

  int cluster() const { return rows.cluster; }
  std::size_t shared_bytes() const { return layout.bytes; }
  Index blocks() const { return units * rows.cluster; }
};

/// "_staged_t<threads>_k<cluster>_band<groups>" for op names, with "_staggered" where the first
/// wave is; "" when not usable.
inline std::string staged_name(const StagedPlan& plan) {
  if (!plan.usable) return "";
  return "_staged_t" + std::to_string(plan.threads) + "_k" + std::to_string(plan.cluster()) + "_band" +
         std::to_string(plan.rows.band_groups) + (plan.stagger.units > 0 ? "_staggered" : "");
}

/// The most dynamic shared memory a staged block may take on `device`: its shared memory per
/// block, less the kernels' static arrays; 0 if the runtime could not say.
inline std::size_t staged_budget(const DeviceInfo& device) {
  const std::size_t available = device.shared_per_block_opt_in;
  return available > kStagedStaticBytes ? available - kStagedStaticBytes : 0;
}

/// The most dynamic shared memory each of two staged blocks may take and still share a
/// multiprocessor: half of its shared memory, less what the runtime reserves per block and the
/// kernels' static arrays; 0 if the runtime could not say.
inline std::size_t staged_pair_budget(const DeviceInfo& device) {
  const std::size_t per_block = device.shared_per_multiprocessor / 2,
                    taken = device.reserved_shared_per_block + kStagedStaticBytes;
  return per_block > taken ? per_block - taken : 0;
}

/// Which staged kernel a plan is for: the forward, or the backward with its cluster meeting over
/// group totals or over channel totals (kStagedGroupMeeting, staged_backward_kernels.hpp).
enum class StagedOp { kForward, kBackwardGroups, kBackwardChannels };

/// The budget tiers `op` tries, in order.
struct StagedBudgets {
  const StagedBudget* first;
  std::size_t count;
};
inline StagedBudgets staged_budgets(StagedOp op) {
  switch (op) {
    case StagedOp::kForward: return {kStagedForwardBudgets, std::size(kStagedForwardBudgets)};
    case StagedOp::kBackwardGroups: return {kStagedBackwardGroupBudgets, std::size(kStagedBackwardGroupBudgets)};
    default: return {kStagedBackwardBudgets, std::size(kStagedBackwardBudgets)};
  }
}

/// The dynamic shared memory of a staged block of `threads` threads in cluster configuration `c`
/// for `op` (StagedLayout), its bytes 0 when it needs more than `budget`. The forward stages x and
/// keeps γ, β and its channel totals; the backward stages x and dy and keeps γ (and, meeting over
/// channels, their γ-weighted totals). The cluster exchanges a pair of floats per band group and
/// rank, or per band channel and rank for the meeting over channels. The scratch takes what the
/// warps' partials of all V elements need, up to kStagedMaxThreads entries and what the budget
/// leaves, but at least one entry per thread; for the meeting over groups it must hold all of them
/// and two group halves (cluster_group_sums), and a pair per thread for the fold blocks'
/// row sums (fold_in_grid).
inline StagedLayout staged_layout(const OneReadRows& c, Index threads, int V, StagedOp op, std::size_t budget) {
  constexpr std::size_t pair = sizeof(GradientSums);
  static_assert(sizeof(GradientSums) == 2 * sizeof(float), "the exchange, scratch and totals hold pairs of floats");
  const bool forward = op == StagedOp::kForward, group_meeting = op == StagedOp::kBackwardGroups;
  const Index channels = c.columns * V;
  const int tensors = forward ? 1 : 2, parameter_arrays = forward ? 2 : 1;
  StagedLayout l;
  const std::size_t staging = static_cast<std::size_t>(c.span * c.columns) * 16 * static_cast<std::size_t>(tensors);
  const Index exchanged = op == StagedOp::kBackwardChannels ? channels : Index{c.band_groups};
  const std::size_t exchange = static_cast<std::size_t>(c.cluster * exchanged) * pair;
  const std::size_t totals = group_meeting ? 0 : static_cast<std::size_t>(channels) * pair;
  const std::size_t parameters =
      static_cast<std::size_t>(channels) * sizeof(float) * static_cast<std::size_t>(parameter_arrays);
  const std::size_t fixed = staging + exchange + totals + parameters;
  // One pass needs V entries per warp and column (warps · min(columns, warp width) ≤ threads; the
  // widest warp this build targets: a narrower one takes more passes).
  const Index width = kStagedWarpGranule, holders = c.columns < width ? c.columns : width;
  Index entries = (group_meeting ? V + 2 : V) * (threads / width) * holders;
  if (!group_meeting) {
    if (entries > kStagedMaxThreads) entries = kStagedMaxThreads;
    const Index room = fixed < budget ? static_cast<Index>((budget - fixed) / pair) : 0;
    if (entries > room) entries = room;
  }
  if (entries < threads) entries = threads;
  const std::size_t bytes = fixed + static_cast<std::size_t>(entries) * pair;
  if (bytes > budget || bytes > 0xffffffffu) return l;
  l.slots = static_cast<int>(ceil_div(c.span, c.rows_per_step));
  l.tensor_vectors = static_cast<int>(c.span * c.columns);  // fits: the block's bytes do
  l.scratch_entries = static_cast<int>(entries);
  l.exchange_at = static_cast<unsigned>(staging);
  l.scratch_at = static_cast<unsigned>(staging + exchange);
  l.totals_at = static_cast<unsigned>(l.scratch_at + static_cast<std::size_t>(entries) * pair);
  l.parameters_at = static_cast<unsigned>(l.totals_at + totals);
  l.bytes = static_cast<unsigned>(bytes);
  return l;
}

/// Rows per step (threads = rows per step × columns, whole warps, at most `most`) that cover
/// `span` rows in the fewest slots per thread, then with the fewest padding rows; 0 if none. Fewer
/// slots before less padding: a cluster of 7 with 160 threads instead of 320 (6 padding rows of
/// 586 instead of 22) ran the forward slower.
inline Index staged_rows_per_step(Index columns, Index span, Index most) {
  const Index granule = columns / greatest_common_divisor(columns, kStagedWarpGranule) * kStagedWarpGranule;
  Index best = 0, best_slots = 0, best_padding = 0;
  for (Index threads = granule; threads <= most; threads += granule) {
    const Index step = threads / columns, slots = ceil_div(span, step), padding = slots * step - span;
    if (best == 0 || slots < best_slots || (slots == best_slots && padding <= best_padding)) {
      best = step;
      best_slots = slots;
      best_padding = padding;
    }
  }
  return best;
}

/// Lets `kernel` take up to `bytes` of dynamic shared memory and, where the GPU has them, clusters
/// above kPortableClusterBlocks (each opt-in made once per process: core/kernel_attributes.hpp).
/// Planning and launching ask for the same `bytes` (the staging budget).
template <typename... Params>
hipError_t staged_opt_in(const DeviceInfo& device, void (*kernel)(Params...), std::size_t bytes) {
  hipError_t e = opt_in_shared_memory(kernel, bytes);
  if (e == hipSuccess && device.clusters) e = opt_in_large_clusters(kernel);
  return e;
}

/// The fewest adjacent groups (dividing `groups`, of whole 16-byte vectors, at most
/// kOneReadMaxBandGroups and kStagedMaxBandChannels channels) whose row segment reaches
/// `row_bytes`, or the widest such band; 0 if none.
inline int staged_band(Index groups, Index group_channels, int V, Index element_bytes, Index row_bytes) {
  int band = 0;
  for (int b = 1; b <= kOneReadMaxBandGroups && b * group_channels <= kStagedMaxBandChannels; ++b) {
    if (groups % b != 0 || b * group_channels % V != 0) continue;
    band = b;
    if (b * group_channels * element_bytes >= row_bytes) break;
  }
  return band;
}

/// The staged plan of `op` over x in bands of `band` groups run by `kernel`, or an unusable one.
/// The forward and the backward meeting over channels take the first budget tier that holds a
/// band, and in it the cluster size (any up to kLargestClusterBlocks) that runs the units in the
/// fewest rounds of resident clusters: the smallest that holds them all, or, of those with the
/// fewest rounds, the largest. The runtime counts the resident clusters: it knows the registers,
/// the shared memory and how clusters pack into the GPU's processor clusters (clusters do not
/// straddle them, so larger clusters can leave multiprocessors idle). The backward meeting over
/// groups takes the fewest rows a multiprocessor streams in turn (rounds × rows per block ×
/// resident blocks per multiprocessor), then the smaller cluster: fewest rounds alone picked
/// clusters that left more multiprocessors idle, slower than one more round of larger clusters.
template <typename T, typename... Params>
StagedPlan plan_staged_band(const DeviceInfo& device, const TensorShape& x, Index groups, StagedOp op, int band,
                            void (*kernel)(Params...)) {
  constexpr int V = kVector16<T>;
  StagedPlan plan;
  const Index group_channels = x.c() / groups;
  OneReadRows m;
  m.columns = band * group_channels / V;
  m.group_columns = m.columns / band;  // unused: a vector may hold channels of two groups
  m.positions = x.spatial_size();
  m.band_groups = band;
  plan.units = x.n() * (groups / band);
  const bool group_meeting = op == StagedOp::kBackwardGroups;
  const std::size_t device_budget = staged_budget(device), pair_budget = staged_pair_budget(device);
  const auto opt_in = [&] { return staged_opt_in(device, kernel, device_budget); };
  const int most_blocks = device.clusters ? kLargestClusterBlocks : 1;
  const StagedBudgets tiers = staged_budgets(op);
  Index best_rounds = 0, best_at_once = 0, best_cost = 0;
  for (std::size_t t = 0; t < tiers.count && !plan.usable; ++t) {
    const StagedBudget& tier = tiers.first[t];
    const std::size_t budget = tier.pair && pair_budget < device_budget ? pair_budget : device_budget;
    for (int cluster = 1; cluster <= most_blocks; ++cluster) {
      OneReadRows c = m;
      c.deal_over(cluster);
      if (c.span * (cluster - 1) >= c.positions) break;  // a block with nothing to do
      c.rows_per_step = staged_rows_per_step(c.columns, c.span, tier.most_threads);
      if (c.rows_per_step == 0) break;
      const Index threads = c.rows_per_step * c.columns;
      const StagedLayout layout = staged_layout(c, threads, V, op, budget);
      if (layout.bytes == 0) continue;
      const Index resident = remembered_resident_clusters(kernel, static_cast<unsigned>(threads),
                                                          static_cast<unsigned>(cluster), layout.bytes, opt_in);
      if (resident <= 0) continue;
      const Index units_at_once = resident < plan.units ? resident : plan.units;
      const Index rounds = ceil_div(plan.units, units_at_once);
      Index cost = 0;
      bool take;
      if (group_meeting) {
        // Rows each multiprocessor streams in turn: small blocks sit several to a multiprocessor.
        const Index sms = device.multiprocessors > 0 ? Index{device.multiprocessors} : 1;
        cost = rounds * c.span * ceil_div(units_at_once * cluster, sms);
        take = best_cost == 0 || cost < best_cost;  // on a tie, the smaller cluster
      } else {
        // The fewest rounds of resident units; on a tie, where units wait for a turn, the larger
        // cluster, whose blocks, with fewer rows each, live shorter (e.g. clusters of 7, 32
        // resident, over 6, 39 resident, where 128 units take four rounds either way).
        take = best_rounds == 0 || rounds < best_rounds || (rounds == best_rounds && rounds > 1);
      }
      if (take) {
        best_rounds = rounds;
        best_at_once = units_at_once;
        best_cost = cost;
        plan.usable = true;
        plan.rows = c;
        plan.layout = layout;
        plan.threads = static_cast<unsigned>(threads);
        plan.resident_clusters = resident;
      }
      if (units_at_once == plan.units) break;  // every unit at once: larger clusters only spread them
    }
  }
  // The first wave staggered (StagedStagger) where its units are clusters, which hold their blocks
  // in step, and the grid runs enough rounds to pay for the wait. Over the bench list that held
  // from kStaggerMinRounds on; with one or two rounds the wait was pure loss, and so it was for
  // units of one block, which drift apart by themselves.
  if (plan.usable && plan.cluster() > 1 && best_rounds >= kStaggerMinRounds)
    plan.stagger = StagedStagger{static_cast<unsigned>(best_at_once), kStaggerStepNs};
  return plan;
}

/// The staged plan of `op` over x run by `kernel`, or an unusable one: bands of whole 128-byte
/// lines (kStagedRowBytes), and for the backward meeting over groups, where no cluster holds
/// them, bands of 64 bytes (8×512×128×128 16-bit: 4 MB units against 2 MB); the backward meeting
/// over channels keeps bands of 64 bytes, which ran best with it.
template <typename T, typename... Params>
StagedPlan plan_staged(Algorithm algorithm, const Plan& pl, const TensorShape& x, Index groups, StagedOp op,
                       void (*kernel)(Params...)) {
  constexpr int V = kVector16<T>;
  StagedPlan plan;
  if (algorithm != Algorithm::kStaged && algorithm != Algorithm::kAuto) return plan;
  if (pl.path != Path::kChannelsLast || pl.vector != V) return plan;
  const Index group_channels = x.c() / groups, element_bytes = static_cast<Index>(sizeof(T));
  const Index narrow = kStagedRowBytes / 2;
  const Index first_row_bytes = op == StagedOp::kBackwardChannels ? narrow : kStagedRowBytes;
  const int band = staged_band(groups, group_channels, V, element_bytes, first_row_bytes);
  if (band == 0) return plan;
  plan = plan_staged_band<T>(*pl.device, x, groups, op, band, kernel);
  if (!plan.usable && op == StagedOp::kBackwardGroups) {
    const int narrow_band = staged_band(groups, group_channels, V, element_bytes, narrow);
    if (narrow_band != band) plan = plan_staged_band<T>(*pl.device, x, groups, op, narrow_band, kernel);
  }
  // A 1-D grid, with room for the backward's fold blocks (staged_fold_blocks: fewer than the
  // resident blocks).
  plan.usable = plan.usable && plan.blocks() + plan.resident_clusters * plan.cluster() <= 2147483647;
  // kAuto takes it where the grid has a block for every multiprocessor: with fewer, the register
  // one-read kernels, which spread a unit over more threads, ran faster.
  if (algorithm == Algorithm::kAuto && plan.blocks() < Index{pl.device->multiprocessors}) plan.usable = false;
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

/// Blocks the staged backward meeting over groups adds to its grid to fold dγ/dβ (fold_in_grid) over
/// `channels`: whole clusters, a block per kGammaBetaChannels channels, but fewer clusters than
/// the GPU holds at once, so that a staged cluster always finds room while fold blocks wait for
/// its flags; 0 where the GPU holds a single cluster (then a kernel of its own folds).
inline Index staged_fold_blocks(const StagedPlan& plan, Index channels) {
  const Index cluster = plan.cluster(), chunks = ceil_div(channels, Index{kGammaBetaChannels});
  Index clusters = ceil_div(chunks, cluster);
  if (clusters > plan.resident_clusters - 1) clusters = plan.resident_clusters - 1;
  return clusters > 0 ? clusters * cluster : 0;
}

/// Launches `kernel` (a staged kernel) for `plan` with `extra_blocks` more blocks (whole
/// clusters) after the staged ones, after opting in to its shared memory.
template <typename... Params, typename... Args>
Status launch_staged(const DeviceInfo& device, void (*kernel)(Params...), const StagedPlan& plan, Index extra_blocks,
                     hipStream_t stream, Args&&... args) {
  hipError_t e = staged_opt_in(device, kernel, staged_budget(device));
  if (e == hipSuccess)
    e = launch_clustered_with_shared(kernel, static_cast<unsigned>(plan.blocks() + extra_blocks), plan.threads,
                                     static_cast<unsigned>(plan.cluster()), plan.shared_bytes(), stream,
                                     std::forward<Args>(args)...);
  return status_from_hip(e, "launch of a staged GroupNorm kernel", __FILE__, __LINE__);
}

}  // namespace hipgrad::groupnorm::detail
