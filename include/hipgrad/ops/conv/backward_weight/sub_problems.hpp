/// @file sub_problems.hpp
/// @brief Backward-weight as grouped GEMM sub-problems: one per group and split of the output
///        positions, each a DyRows × XPatches product stored by DwStore (operands.hpp).
///        One split writes dw directly; several write fp32 sums per split to the workspace,
///        which a reduction adds in split order and converts once.
#pragma once

#include <vector>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/backward_weight/operands.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"

namespace hipgrad::conv::detail {

template <typename T, int NDim, bool kVectors>
using BackwardWeightSubProblem =
    gemm::SubProblem<DyRows<T, NDim, kVectors>, XPatches<T, NDim, kVectors>, DwStore<T, NDim>>;

/// The GEMM's extents of every group: M = K, N = taps × Cp, and the positions R = N × Π O that
/// the splits share.
struct WeightExtents {
  Index m;
  Index n;
  Index taps;
  Index positions;
};
/// With C padded to `padded` channels.
template <int NDim>
WeightExtents weight_extents(const Problem<NDim>& problem, Index padded) {
  const ConvParams<NDim>& p = problem.params;
  WeightExtents e{p.K, 0, 1, p.N};
  const auto out = p.output_spatial();
  for (int d = 0; d < NDim; ++d) {
    e.taps *= p.filter[d];
    e.positions *= out[d];
  }
  e.n = e.taps * padded;
  return e;
}
template <typename T, int NDim, bool kVectors>
WeightExtents weight_extents(const Problem<NDim>& problem) {
  return weight_extents<NDim>(problem, padded_channels<T, kVectors>(problem.params.C));
}

/// Positions of each split but perhaps the last: ⌈R / splits⌉.
inline Index positions_per_split(Index positions, int splits) {
  return ceil_div(positions, static_cast<Index>(splits));
}

/// Bytes of split sums written and read again that cost about as much time as one K tile of a
/// work item: the model's exchange rate between the reduction's traffic and the GEMM.
inline constexpr double kSumBytesPerKTile = 4.0 * (1 << 20);

/// The split count where the problem leaves it to the op (split_k = 0): the least modelled time,
/// which is the rounds of work items (output tiles × splits) over the multiprocessors times the
/// K tiles of the longest split (two more for its epilogue), plus the splits' fp32 sums written
/// and read again (8 bytes an element a split). A count that leaves the last round nearly empty
/// costs a whole round, so the choice fills the rounds. At most 64 splits, each of at least eight
/// K tiles of `block_k` positions, the sums within 1 GiB; of equal times, the fewer splits.
inline int auto_splits(Index output_tiles, Index positions, Index elements, int block_k, int multiprocessors) {
  if (output_tiles <= 0 || positions <= 0 || multiprocessors <= 0) return 1;
  const Index k_tiles = ceil_div(positions, static_cast<Index>(block_k));
  Index most = k_tiles / 8;
  const Index by_memory = (Index{1} << 30) / static_cast<Index>(sizeof(float)) / (elements + 1);  // no overflow
  for (Index cap : {by_memory, Index{64}}) most = most < cap ? most : cap;
  const auto cost = [&](Index splits) {
    const double rounds = static_cast<double>(ceil_div(output_tiles * splits, static_cast<Index>(multiprocessors)));
    const double depth = static_cast<double>(ceil_div(k_tiles, splits) + 2);
    const double sums = splits > 1 ? 8.0 * static_cast<double>(splits) * static_cast<double>(elements) : 0.0;
    return rounds * depth + sums / kSumBytesPerKTile;
  };
  Index best = 1;
  for (Index splits = 2; splits <= most; ++splits) {
    if (cost(splits) < cost(best)) best = splits;
  }
  return static_cast<int>(best);
}

/// The epilogue of the whole of dw (m = g·K + k, columns tap · padded + c): the reduction's, or
/// a group's with `out` and m_size moved to it.
template <typename T, int NDim>
DwStore<T, NDim> dw_store(const Problem<NDim>& problem, T* dw, Index padded) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.weight_strides;  // [G, K, C, F...]
  DwStore<T, NDim> e{};
  e.out = dw;
  e.split_sums = nullptr;
  e.stride_g = s[0];
  e.stride_k = s[1];
  e.stride_c = s[2];
  for (int d = 0; d < NDim; ++d) {
    e.stride_f[d] = s[3 + d];
    e.filter[d] = FastDivmod(static_cast<std::uint32_t>(p.filter[d]));
  }
  e.channels_k = FastDivmod(static_cast<std::uint32_t>(p.K));
  e.padded_channels = FastDivmod(static_cast<std::uint32_t>(padded));
  e.channels = static_cast<int>(p.C);
  e.m_size = static_cast<int>(p.G * p.K);
  e.n_size = static_cast<int>(weight_extents<NDim>(problem, padded).n);
  e.partials = nullptr;
  return e;
}
template <typename T, int NDim, bool kVectors>
DwStore<T, NDim> dw_store(const Problem<NDim>& problem, T* dw) {
  return dw_store<T, NDim>(problem, dw, padded_channels<T, kVectors>(problem.params.C));
}

/// Every sub-problem of the launch, splits outermost, then groups. With splits > 1, split s of
/// group g writes its fp32 sums to split_sums + (s·G + g)·K·N (rows of N = taps × Cp).
template <typename T, int NDim, bool kVectors>
std::vector<BackwardWeightSubProblem<T, NDim, kVectors>> backward_weight_sub_problems(const Problem<NDim>& problem,
                                                                                      const T* x, const T* dy, T* dw,
                                                                                      int splits, float* split_sums) {
  const ConvParams<NDim>& p = problem.params;
  const WeightExtents e = weight_extents<T, NDim, kVectors>(problem);
  const Index per_split = positions_per_split(e.positions, splits);
  const std::vector<Index>& sx = problem.input_strides;   // [G, N, C, X...]
  const std::vector<Index>& sy = problem.output_strides;  // [G, N, K, O...]
  const auto out = p.output_spatial();
  std::vector<BackwardWeightSubProblem<T, NDim, kVectors>> problems;
  problems.reserve(static_cast<std::size_t>(splits) * static_cast<std::size_t>(p.G));
  for (int split = 0; split < splits; ++split) {
    PositionWalk<NDim> walk{};
    const Index first = per_split * split;
    const Index count = e.positions - first < per_split ? e.positions - first : per_split;
    walk.first = static_cast<int>(first < e.positions ? first : 0);
    walk.k_extent = static_cast<int>(count > 0 ? count : 0);
    for (int d = 0; d < NDim; ++d) walk.lengths[d] = FastDivmod(static_cast<std::uint32_t>(out[d]));
    for (Index g = 0; g < p.G; ++g) {
      BackwardWeightSubProblem<T, NDim, kVectors> sub{};
      DyRows<T, NDim, kVectors>& a = sub.a;
      a.data = dy + g * sy[0];
      a.stride_k = sy[2];
      a.channels = static_cast<int>(p.K);
      a.walk = walk;
      a.walk.stride_n = sy[1];
      XPatches<T, NDim, kVectors>& b = sub.b;
      b.data = x + g * sx[0];
      b.stride_c = sx[2];
      b.walk = walk;
      b.walk.stride_n = sx[1];
      for (int d = 0; d < NDim; ++d) {
        a.walk.stride_o[d] = sy[3 + d];
        b.stride_x[d] = sx[3 + d];
        b.walk.stride_o[d] = p.strides[d] * sx[3 + d];
        b.input_length[d] = static_cast<int>(p.input[d]);
        b.conv_stride[d] = static_cast<int>(p.strides[d]);
        b.dilation[d] = static_cast<int>(p.dilations[d]);
        b.left_pad[d] = static_cast<int>(p.left_pads[d]);
        b.filter[d] = FastDivmod(static_cast<std::uint32_t>(p.filter[d]));
      }
      b.padded_channels = FastDivmod(static_cast<std::uint32_t>(padded_channels<T, kVectors>(p.C)));
      b.channels = static_cast<int>(p.C);
      b.n_extent = static_cast<int>(e.n);
      sub.epilogue = dw_store<T, NDim, kVectors>(problem, dw + g * problem.weight_strides[0]);
      sub.epilogue.m_size = static_cast<int>(p.K);
      if (splits > 1) sub.epilogue.split_sums = split_sums + (split * p.G + g) * e.m * e.n;
      problems.push_back(sub);
    }
  }
  return problems;
}

}  // namespace hipgrad::conv::detail
