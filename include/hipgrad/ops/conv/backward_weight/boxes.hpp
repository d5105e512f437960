/// @file boxes.hpp
/// @brief Backward-weight's operands as tiled tensor maps, for the box producer
///        (gemm/collective/box_producer.hpp): each stage is a few TMA copies instead of 16-byte
///        gathers (the maps, coordinates and plan are also checked on the CPU,
///        tests/conv/test_conv_backward_weight_tma.cpp).
///
/// The GEMM of a group is operands.hpp's (M = K, N = taps × Cp, its K the output
/// positions) with Cp = C rounded up to a 128-byte panel, and its K tiled by boxes of output
/// positions: K tile t is box t of the grid (n, o_1, …, o_NDim) cut into boxes of exactly BK
/// positions (weight_position_boxes), its rows in the box's order (o_last fastest). Both operands
/// are MN-major tiles of 128-byte panels, every panel one box copy (fp32's B turned K-major in
/// place once it lands, for TF32 wgmma; A then goes to wgmma from registers):
///
/// * A: dy's map (k, [g], o_NDim, …, o_1, [n]), box (panel, [1], shape_NDim, …, shape_1,
///   shape_n), at (k0, [g], the box's first o, its first n).
/// * B: x's map (c, [g], i_NDim, …, i_1, [n]), box (panel, [1], shape_d·s_d, …, shape_n) stepping
///   s_d elements along i_d, at (c0, [g], first o_d·s_d + f_d·dilation_d − left_pad_d, first n)
///   for the panel's tap f: row r of both boxes is the same output position.
///
/// A map has a g dimension where G > 1 (box 1: a box stays inside its group, so channels past K
/// or C read as zeros), except where the channels are whole panels and the groups' channels one
/// run (g stride = channels): then g folds into the channel dimension (channel g·K + k); it has
/// no n dimension where N = 1. So a grouped 3-D map fits TMA's five dimensions where either holds.
///
/// Positions past the grid read dy as zeros (outside dy), so their products are 0 · x; the box
/// shape is chosen so that x reads there are outside x too wherever the grid does not end on a
/// box (see weight_position_boxes), so that a non-finite x the convolution never reads cannot
/// make a NaN.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/common/box_operands.hpp"
#include "hipgrad/ops/conv/backward_weight/sub_problems.hpp"
#include "hipgrad/ops/conv/common/position_boxes.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/device/tensor_map_shape.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"

namespace hipgrad::conv::detail {

/// The largest convolution stride a box steps (TMA's element strides are 1 to 8).
inline constexpr int kMaxBoxStep = 8;

/// C rounded up to whole 128-byte panels: a panel of B never straddles two taps.
template <typename T>
Index panel_channels(Index channels) {
  return round_up(channels, static_cast<Index>(kTmaRowBytes / sizeof(T)));
}

/// Boxes of exactly `rows` output positions (a power of two: every row of a K tile is a product
/// of A and B, so a box must fill it), shape[d] a power of two, x's box shape[d]·s_d at most 256,
/// with the fewest boxes; among equals the longest last dimension. A box reaching past the grid's
/// end in dimension d (where shape_d does not divide O_d) must read x there only outside x or
/// where the convolution reads it anyway, never an element it leaves unread; and it must not
/// reach past N where a map has no n dimension. Where no shape meets these, rows() of the result
/// differs from `rows`.
template <int NDim>
PositionBoxes<NDim> weight_position_boxes(const Problem<NDim>& problem, int rows);

/// How a map of x or dy lays out the groups and the images (see the file's comment).
struct ActivationMapForm {
  bool group_dimension;  ///< g is a dimension of its own (G > 1, not folded)
  bool fold_groups;      ///< channel coordinate g·channels + k
  bool n_dimension;      ///< n is a dimension (dropped only where N = 1 and a grouped 3-D map needs it)
  int channels;          ///< the map's channels a group (K or C), for the folded coordinate

  HIPGRAD_HOST_DEVICE int rank(int spatial) const {
    return 1 + (group_dimension ? 1 : 0) + spatial + (n_dimension ? 1 : 0);
  }
};

/// The form of x's map (x = true) or dy's for panels of `element_bytes` elements.
template <int NDim>
ActivationMapForm activation_map_form(const Problem<NDim>& problem, bool x, int element_bytes);

/// The maps of dy and x with the boxes' shape (x's stepping the convolution's strides).
template <int NDim>
gemm::TensorMapShape dy_box_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes);
template <int NDim>
gemm::TensorMapShape x_box_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes);

/// Why tensor maps cannot read backward-weight's x and dy (null where they can).
template <int NDim>
const char* backward_weight_tma_blocker(const Problem<NDim>& problem, const void* x, const void* dy, int element_bytes);

/// The part of backward_weight_tma_blocker that the pointers do not enter, for `boxes`
/// (weight_position_boxes'): what is left is each map's tensor_map_blocker with its pointer.
template <int NDim>
const char* backward_weight_box_blocker(const Problem<NDim>& problem, int element_bytes,
                                        const PositionBoxes<NDim>& boxes);

/// A map's leading coordinates (channel, then g where it is a dimension) for group g.
HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int map_channels(const ActivationMapForm& form, int group, int channel, int* c) {
  int r = 0;
  c[r++] = (form.fold_groups ? group * form.channels : 0) + channel;
  if (form.group_dimension) c[r++] = group;
  return r;
}

/// A sub-problem's (group, split) copy coordinates, innermost dimension first.
template <int NDim>
struct WeightBoxCoordinates {
  int group;  ///< group g
  ActivationMapForm dy_form;
  ActivationMapForm x_form;
  int first_box;               ///< the split's first box
  int bk;                      ///< positions a box (a K tile)
  BoxGrid<NDim> grid;          ///< the output positions' boxes
  FastDivmod padded_channels;  ///< Cp: column = tap · Cp + c
  FastDivmod filter[NDim];
  int conv_stride[NDim];
  int dilation[NDim];
  int left_pad[NDim];

  /// dy's box of the K tile at k_base for the channels from k0; returns the map's rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int dy_box(int k_base, int k0, int* c) const {
    int first[NDim + 1];
    grid.origin(first_box + k_base / bk, first);
    int r = map_channels(dy_form, group, k0, c);
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) c[r++] = first[1 + d];
    if (dy_form.n_dimension) c[r++] = first[0];
    return r;
  }

  /// x's box of the K tile at k_base for the panel of columns from `column`; returns the rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int x_box(int k_base, int column, int* c) const {
    int first[NDim + 1];
    grid.origin(first_box + k_base / bk, first);
    std::uint32_t tap = 0, c0 = 0, rest = 0, f = 0;
    padded_channels.divmod(static_cast<std::uint32_t>(column), &tap, &c0);
    int shift[NDim];
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      filter[d].divmod(tap, &rest, &f);
      shift[d] = static_cast<int>(f) * dilation[d] - left_pad[d];
      tap = rest;
    }
    int r = map_channels(x_form, group, static_cast<int>(c0), c);
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) c[r++] = first[1 + d] * conv_stride[d] + shift[d];
    if (x_form.n_dimension) c[r++] = first[0];
    return r;
  }
};

/// A of a boxed sub-problem: per K tile one box of dy's map per 128-byte panel of the block's
/// rows (k; mn_extent = K; k_extent = the split's boxes × bk).
template <typename T, int NDim>
struct DyBoxRows : PanelBoxes<DyBoxRows<T, NDim>, T> {
  WeightBoxCoordinates<NDim> at;

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int coordinates(int m_base, int k_base, int p, int* c) const {
    return at.dy_box(k_base, m_base + p * (kTmaRowBytes / static_cast<int>(sizeof(T))), c);
  }
};

/// B of a boxed sub-problem: per K tile one box of x's map per 128-byte panel of the block's
/// columns (t, c; mn_extent = taps × Cp), each at its own tap. fp32 (TF32, whose wgmma reads B
/// K-major only): the panels land MN-major and the box producer turns them K-major in place.
template <typename T, int NDim>
struct XBoxPatches : PanelBoxes<XBoxPatches<T, NDim>, T> {
  static constexpr bool kTransposedOnArrival = sizeof(T) == 4;
  static constexpr bool kKContiguous = kTransposedOnArrival;  ///< as the consumers read the tile
  WeightBoxCoordinates<NDim> at;

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int coordinates(int n_base, int k_base, int p, int* c) const {
    return at.x_box(k_base, n_base + p * (kTmaRowBytes / static_cast<int>(sizeof(T))), c);
  }
};

template <typename T, int NDim>
using WeightBoxSubProblem = gemm::SubProblem<DyBoxRows<T, NDim>, XBoxPatches<T, NDim>, DwStore<T, NDim>>;

/// The box path's launch: map 0 dy's, map 1 x's, and one sub-problem per split and group
/// (splits outermost), whose operands point at map i as maps_on_device + 128·i; with several
/// splits split s of group g stores its fp32 sums at split_sums + (s·G + g)·K·taps·Cp.
template <typename T, int NDim>
struct WeightBoxPlan {
  std::vector<gemm::TensorMapShape> maps;
  std::vector<WeightBoxSubProblem<T, NDim>> problems;
};

/// Boxes of each split but perhaps the last.
inline Index boxes_per_split(Index boxes, int splits) { return ceil_div(boxes, static_cast<Index>(splits)); }

/// The plan for blocks of block_m × block_n with panels panel_bytes apart and K tiles of
/// `boxes` (weight_position_boxes', boxes.rows() positions each).
template <typename T, int NDim>
WeightBoxPlan<T, NDim> weight_box_plan(const Problem<NDim>& problem, const PositionBoxes<NDim>& boxes, T* dw,
                                       const unsigned char* maps_on_device, int block_m, int block_n, int panel_bytes,
                                       int splits, float* split_sums);

// ---- definitions ---------------------------------------------------------------------------

template <int NDim>
PositionBoxes<NDim> weight_position_boxes(const Problem<NDim>& problem, int rows) {
  constexpr int kDims = NDim + 1;
  const ConvParams<NDim>& p = problem.params;
  const auto out = p.output_spatial();
  std::array<Index, kDims> extent{};
  std::array<int, kDims> step{};
  extent[0] = p.N;
  step[0] = 1;
  // Without an n dimension in a map (N = 1), a box cannot reach past n.
  const int element_bytes = kTmaRowBytes / rows;
  const bool n_fixed = !activation_map_form(problem, true, element_bytes).n_dimension ||
                       !activation_map_form(problem, false, element_bytes).n_dimension;
  for (int d = 0; d < NDim; ++d) {
    const std::size_t e = static_cast<std::size_t>(d) + 1;
    extent[e] = out[static_cast<std::size_t>(d)];
    step[e] = static_cast<int>(p.strides[d]);
  }
  // Whether input position i of dimension d is one the convolution reads.
  const auto read = [&p, &out](int d, Index i) {
    for (Index f = 0; f < p.filter[d]; ++f) {
      const Index j = i + p.left_pads[d] - f * p.dilations[d];
      if (j >= 0 && j % p.strides[d] == 0 && j / p.strides[d] < out[static_cast<std::size_t>(d)]) return true;
    }
    return false;
  };
  // Whether boxes of `shape` along dimension e may reach past the grid there: along n only where
  // the maps have an n dimension, along o_d only onto x positions outside x or read anyway.
  const auto overhang_allowed = [&](std::size_t e, int shape) {
    if (extent[e] % shape == 0) return true;
    if (e == 0) return !n_fixed;
    const int d = static_cast<int>(e) - 1;
    for (Index o = extent[e]; o < round_up(extent[e], static_cast<Index>(shape)); ++o) {
      for (Index f = 0; f < p.filter[d]; ++f) {
        const Index i = o * p.strides[d] + f * p.dilations[d] - p.left_pads[d];
        if (i >= 0 && i < p.input[d] && !read(d, i)) return false;
      }
    }
    return true;
  };
  // The shapes 2^k each dimension allows, worked out once, not at every node of the search.
  int rows_log2 = 0;
  while (rows_log2 < 30 && (2 << rows_log2) <= rows) ++rows_log2;
  std::array<std::array<bool, 31>, kDims> allowed{};
  for (std::size_t e = 0; e < static_cast<std::size_t>(kDims); ++e) {
    for (int k = 0; k <= rows_log2; ++k) {
      allowed[e][static_cast<std::size_t>(k)] = (1 << k) * step[e] <= kMaxBoxExtent && overhang_allowed(e, 1 << k);
    }
  }
  PositionBoxes<NDim> best{};
  Index best_tiles = -1;
  std::array<int, kDims> shape{};
  // Depth-first over the powers of two (room: the exponent left), the last dimension from the
  // longest down; a shape whose product falls short of rows is none.
  auto visit = [&](auto&& self, int d, int room) -> void {
    if (d < 0) {
      if (room != 0 || (1 << rows_log2) != rows) return;
      PositionBoxes<NDim> b{};
      Index tiles = 1;
      for (int e = 0; e < kDims; ++e) {
        b.extent[e] = extent[static_cast<std::size_t>(e)];
        b.shape[e] = shape[static_cast<std::size_t>(e)];
        b.boxes[e] = ceil_div(b.extent[e], static_cast<Index>(b.shape[e]));
        tiles *= b.boxes[e];
      }
      if (best_tiles < 0 || tiles < best_tiles) best = b, best_tiles = tiles;
      return;
    }
    const std::size_t e = static_cast<std::size_t>(d);
    for (int k = room; k >= 0; --k) {
      if (!allowed[e][static_cast<std::size_t>(k)]) continue;
      shape[e] = 1 << k;
      self(self, d - 1, room - k);
    }
  };
  visit(visit, kDims - 1, rows_log2);
  return best;
}

template <int NDim>
ActivationMapForm activation_map_form(const Problem<NDim>& problem, bool x, int element_bytes) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = x ? problem.input_strides : problem.output_strides;  // [G, N, channels, …]
  const Index channels = x ? p.C : p.K;
  ActivationMapForm form{};
  form.n_dimension = false;
  form.channels = static_cast<int>(channels);
  form.fold_groups = p.G > 1 && channels % (kTmaRowBytes / element_bytes) == 0 && s[2] == 1 && s[0] == channels;
  form.group_dimension = p.G > 1 && !form.fold_groups;
  // n is dropped only where that brings a grouped 3-D map within five dimensions.
  form.n_dimension = p.N > 1 || form.rank(NDim) + 1 <= gemm::TensorMapShape::kMaxRank;
  return form;
}

/// A map over an activation at strides s ([G, N, channels, …]) of spatial sizes `sizes`, its box
/// the boxes' shape stepping `steps`.
template <int NDim>
gemm::TensorMapShape activation_box_map(const Problem<NDim>& problem, const ActivationMapForm& form, int element_bytes,
                                        const std::vector<Index>& s, const Index* sizes, const int* steps,
                                        const PositionBoxes<NDim>& boxes) {
  const ConvParams<NDim>& p = problem.params;
  gemm::TensorMapShape m;
  m.element_bytes = element_bytes;
  auto add = [&m, element_bytes](Index size, Index stride, int box, int step) {
    m.size[m.rank] = size;
    m.stride_bytes[m.rank] = stride * element_bytes;
    m.box[m.rank] = (box < 1 ? 1 : box) * step;
    m.element_stride[m.rank] = step;
    ++m.rank;
  };
  add((form.fold_groups ? p.G : 1) * form.channels, s[2], kTmaRowBytes / element_bytes, 1);
  if (form.group_dimension) add(p.G, s[0], 1, 1);
  for (int d = NDim - 1; d >= 0; --d) add(sizes[d], s[3 + d], boxes.shape[1 + d], steps[d]);
  if (form.n_dimension) add(p.N, s[1], boxes.shape[0], 1);
  return m;
}

template <int NDim>
gemm::TensorMapShape dy_box_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes) {
  const auto out = problem.params.output_spatial();
  Index sizes[NDim];
  int steps[NDim];
  for (int d = 0; d < NDim; ++d) sizes[d] = out[static_cast<std::size_t>(d)], steps[d] = 1;
  return activation_box_map(problem, activation_map_form(problem, false, element_bytes), element_bytes,
                            problem.output_strides, sizes, steps, boxes);
}

template <int NDim>
gemm::TensorMapShape x_box_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes) {
  const ConvParams<NDim>& p = problem.params;
  Index sizes[NDim];
  int steps[NDim];
  for (int d = 0; d < NDim; ++d) sizes[d] = p.input[d], steps[d] = static_cast<int>(p.strides[d]);
  return activation_box_map(problem, activation_map_form(problem, true, element_bytes), element_bytes,
                            problem.input_strides, sizes, steps, boxes);
}

template <int NDim>
const char* backward_weight_tma_blocker(const Problem<NDim>& problem, const void* x, const void* dy,
                                        int element_bytes) {
  const PositionBoxes<NDim> boxes = weight_position_boxes(problem, kTmaRowBytes / element_bytes);
  if (const char* blocker = backward_weight_box_blocker(problem, element_bytes, boxes)) return blocker;
  if (const char* blocker = gemm::tensor_map_blocker(dy_box_map(problem, element_bytes, boxes), dy)) return blocker;
  return gemm::tensor_map_blocker(x_box_map(problem, element_bytes, boxes), x);
}

template <int NDim>
const char* backward_weight_box_blocker(const Problem<NDim>& problem, int element_bytes,
                                        const PositionBoxes<NDim>& boxes) {
  const ConvParams<NDim>& p = problem.params;
  if (problem.output_strides[2] != 1) return "dy's channels are not contiguous (tensor maps read runs of channels)";
  if (problem.input_strides[2] != 1) return "x's channels are not contiguous (tensor maps read runs of them)";
  for (bool x : {false, true}) {
    if (activation_map_form(problem, x, element_bytes).rank(NDim) > gemm::TensorMapShape::kMaxRank) {
      return "a grouped 3-D map of N > 1 whose groups' channels are not one run of whole 128-byte panels needs six "
             "tensor-map dimensions (five at most)";
    }
  }
  for (int d = 0; d < NDim; ++d) {
    if (p.strides[d] > kMaxBoxStep) return "a convolution stride above 8 (a tensor map steps at most 8 elements)";
  }
  if (boxes.rows() != kTmaRowBytes / element_bytes) {
    return "no box of exactly one K tile of output positions lies within x where it must (N = 1 without an n "
           "dimension, and output lengths that leave x unread past them)";
  }
  return nullptr;
}

template <typename T, int NDim>
WeightBoxPlan<T, NDim> weight_box_plan(const Problem<NDim>& problem, const PositionBoxes<NDim>& boxes, T* dw,
                                       const unsigned char* maps_on_device, int block_m, int block_n, int panel_bytes,
                                       int splits, float* split_sums) {
  constexpr int kBytes = static_cast<int>(sizeof(T));
  constexpr int kPanel = kTmaRowBytes / kBytes;
  const ConvParams<NDim>& p = problem.params;
  const int bk = boxes.rows();
  const Index cp = panel_channels<T>(p.C);
  const WeightExtents e = weight_extents<NDim>(problem, cp);
  WeightBoxPlan<T, NDim> plan;
  plan.maps.push_back(dy_box_map(problem, kBytes, boxes));
  plan.maps.push_back(x_box_map(problem, kBytes, boxes));
  WeightBoxCoordinates<NDim> at{};
  at.dy_form = activation_map_form(problem, false, kBytes);
  at.x_form = activation_map_form(problem, true, kBytes);
  at.bk = bk;
  at.grid = box_grid(boxes);
  at.padded_channels = FastDivmod(static_cast<std::uint32_t>(cp));
  for (int d = 0; d < NDim; ++d) {
    at.filter[d] = FastDivmod(static_cast<std::uint32_t>(p.filter[d]));
    at.conv_stride[d] = static_cast<int>(p.strides[d]);
    at.dilation[d] = static_cast<int>(p.dilations[d]);
    at.left_pad[d] = static_cast<int>(p.left_pads[d]);
  }
  const Index per_split = boxes_per_split(boxes.tiles(), splits);
  plan.problems.reserve(static_cast<std::size_t>(splits) * static_cast<std::size_t>(p.G));
  for (int split = 0; split < splits; ++split) {
    const Index first = per_split * split;
    const Index count = boxes.tiles() - first < per_split ? boxes.tiles() - first : per_split;
    for (Index g = 0; g < p.G; ++g) {
      WeightBoxSubProblem<T, NDim> s{};
      s.a.map = maps_on_device;
      s.a.at = at;
      s.a.at.group = static_cast<int>(g);
      s.a.at.first_box = static_cast<int>(count > 0 ? first : 0);
      s.a.panels = block_m / kPanel;
      s.a.panel_bytes = panel_bytes;
      s.a.mn_extent = static_cast<int>(p.K);
      s.a.k_extent = static_cast<int>(count > 0 ? count * bk : 0);
      s.b.map = maps_on_device + kTensorMapBytes;
      s.b.at = s.a.at;
      s.b.panels = block_n / kPanel;
      s.b.panel_bytes = panel_bytes;
      s.b.mn_extent = static_cast<int>(e.n);
      s.b.k_extent = s.a.k_extent;
      s.epilogue = dw_store<T, NDim>(problem, dw + g * problem.weight_strides[0], cp);
      s.epilogue.m_size = static_cast<int>(p.K);
      if (splits > 1) s.epilogue.split_sums = split_sums + (split * p.G + g) * e.m * e.n;
      plan.problems.push_back(s);
    }
  }
  return plan;
}

}  // namespace hipgrad::conv::detail
