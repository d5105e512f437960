/// @file packed_groups.hpp
/// @brief Host: kAuto's block-diagonal packing of groups for the tensor cores. P adjacent groups of
///        C → K channels are one group of P·C → P·K channels whose weight is zero off its P
///        diagonal blocks: dy, x and dx keep their memory (the groups' channels are adjacent),
///        the packed weight (backward-data) or the packed dw (backward-weight) lives in the
///        workspace, and the box path runs tiles of 64 channels instead of tiles mostly padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/direct/heuristics.hpp"
#include "hipgrad/ops/conv/problem.hpp"

namespace hipgrad::conv::detail {

/// The channels a packed group reaches at most: one 64-channel tile side.
inline constexpr Index kPackedChannels = 64;
/// The fewest channels (C and K alike) of a group kAuto packs: below, the P-fold FLOPs of the
/// zero blocks outgrow what the tensor cores save (depthwise stays on the direct kernels).
inline constexpr Index kPackedMinChannels = 4;

/// Whether the groups' channels are adjacent and contiguous in an activation's strides
/// [G, N, channels, spatial...]: group g + 1 starts where group g's channels end.
inline bool groups_adjacent(const std::vector<Index>& strides, Index channels) {
  return strides[2] == 1 && strides[0] == channels;
}

/// The groups kAuto packs into one for a problem of T: the most (a power of two dividing G) whose
/// P·max(C, K) channels fit kPackedChannels, for 16-bit data whose groups of kPackedMinChannels to
/// direct::kAutoChannels channels are adjacent in both activations; 1 where it packs none.
template <typename T, int NDim>
int packed_group_count(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  const Index widest = p.C > p.K ? p.C : p.K;
  const bool takes = problem.algorithm == Algorithm::kAuto && sizeof(T) == 2 && p.C >= kPackedMinChannels &&
                     p.K >= kPackedMinChannels && widest <= direct::kAutoChannels &&
                     groups_adjacent(problem.input_strides, p.C) && groups_adjacent(problem.output_strides, p.K);
  int groups = 1;
  while (takes && p.G % (2 * groups) == 0 && 2 * groups * widest <= kPackedChannels) groups *= 2;
  return groups;
}

/// The packed problem: G / P groups of P·C → P·K channels on the box path, the activations' memory
/// as given, the weight GKYXC-packed (where the workspace holds it).
template <int NDim>
Problem<NDim> packed_problem(const Problem<NDim>& problem, int groups) {
  Problem<NDim> packed = problem;
  ConvParams<NDim>& p = packed.params;
  p.G /= groups, p.C *= groups, p.K *= groups;
  packed.input_strides[0] *= groups;
  packed.output_strides[0] *= groups;
  packed.weight_strides = weight_strides(p, ConvLayout::kNHWGC);
  packed.algorithm = Algorithm::kTmaBoxes;
  return packed;
}

/// Elements of the packed weight: G / P · P·K · taps · P·C = P · the weight's.
template <int NDim>
Index packed_weight_elements(const Problem<NDim>& problem, int groups) {
  const ConvParams<NDim>& p = problem.params;
  Index taps = 1;
  for (int d = 0; d < NDim; ++d) taps *= p.filter[d];
  return p.G * p.K * p.C * taps * groups;
}

/// Workspace bytes the packed weight takes ahead of the packed op's own (256 more, so that it
/// starts 256-byte aligned wherever the caller's workspace starts).
template <typename T, int NDim>
std::size_t packed_weight_bytes(const Problem<NDim>& problem, int groups) {
  return round_up(static_cast<std::size_t>(packed_weight_elements(problem, groups)) * sizeof(T), std::size_t{256}) +
         256;
}

/// An op's workspace_size where kAuto may pack: the larger of `own` (the unpacked choice's) and the
/// packed weight's plus `packed_workspace(the packed problem)` (0: a packed problem the box path
/// cannot size, never run).
template <typename T, int NDim, typename PackedWorkspace>
std::size_t workspace_with_packing(const Problem<NDim>& problem, std::size_t own, PackedWorkspace&& packed_workspace) {
  const int groups = packed_group_count<T>(problem);
  const std::size_t inner = groups > 1 ? packed_workspace(packed_problem(problem, groups)) : 0;
  const std::size_t packed = inner > 0 ? packed_weight_bytes<T>(problem, groups) + inner : 0;
  return packed > own ? packed : own;
}

/// The packed weight's place in the workspace: its first 256-byte-aligned byte.
template <typename T>
T* packed_weight_in(void* workspace) {
  const auto address = reinterpret_cast<std::uintptr_t>(workspace);
  return reinterpret_cast<T*>(round_up(address, std::uintptr_t{256}));
}

/// What a path check may take for the packed weight before the workspace is known: an address as
/// aligned as packed_weight_in's (never dereferenced).
template <typename T>
const T* packed_weight_stand_in() {
  return reinterpret_cast<const T*>(std::uintptr_t{256});
}

}  // namespace hipgrad::conv::detail
