/// @file boxes.hpp
/// @brief Backward-data's operands as tiled tensor maps, for a producer that loads each stage with
///        a few TMA copies instead of 16-byte gathers (box_producer.hpp; the maps, coordinates
///        and epilogue are also checked on the CPU, tests/conv/test_conv_backward_data_tma.cpp).
///
/// A sub-problem (group g, stride phase) is tiled in M by boxes of its positions
/// (position_boxes.hpp) and in K by tiles of one tap and BK channels (K tiles = taps × ⌈K / BK⌉,
/// BK channels = one 128-byte row). Per K tile:
///
/// * A: one box of dy's map (k, [g], o_NDim, …, o_1, n), box (BK, [1], shape_NDim, …, shape_1,
///   shape_n), at (k0, [g], output_base + i − j·tap_dilation per dimension, n): the box's rows
///   land in the tile's row order (the last spatial dimension fastest); coordinates outside dy —
///   the padding, negative ones included — and channels past K read as zeros.
/// * B: one box per 128-byte panel of the tile's BN columns of w's map (c, f, k, [g]) with the
///   filter taps flattened (f = Σ f_d·filter_pitch_d, the filter packed), box (panel, 1, BK, [1]),
///   at (c0, f(first_tap + j·tap_step), k0, [g]); channels past K read as zeros here too, so
///   their products are 0·0.
///
/// The g dimension (box 1) keeps a box inside its group: a channel past K reads zero, never the
/// next group's data. It exists where G > 1, which 3-D problems cannot afford (six dimensions).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/ops/conv/backward_data/sub_problems.hpp"
#include "hipgrad/ops/conv/common/box_operands.hpp"
#include "hipgrad/ops/conv/common/position_boxes.hpp"
#include "hipgrad/ops/conv/backward_data/stride_phases.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/kernel/grouped_tiles.hpp"
#include "hipgrad/gemm/device/tensor_map_shape.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"

namespace hipgrad::conv::detail {

/// Why tensor maps cannot read backward-data's dy and w (null where they can): channels
/// contiguous (dy's k, w's c), dy within five dimensions, w's filter packed (its taps flatten
/// into one dimension), and TMA's rules for both maps at their bases.
template <int NDim>
const char* backward_data_tma_blocker(const Problem<NDim>& problem, const void* dy, const void* w, int element_bytes);

/// The maps' shapes: dy's with the box of `boxes`, w's with a panel a box.
template <int NDim>
gemm::TensorMapShape dy_tensor_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes);
template <int NDim>
gemm::TensorMapShape w_tensor_map(const Problem<NDim>& problem, int element_bytes);

/// The copies' coordinates of one sub-problem (group, phase), innermost dimension first, as the
/// producer makes them per K tile: kt = tap × chunks + chunk, the taps' j in stride_phases' order
/// (the last dimension fastest).
template <int NDim>
struct TmaTapCoordinates {
  int group;               ///< the g coordinate; -1: the maps have no g dimension
  int bk;                  ///< channels a K tile
  FastDivmod chunks;       ///< ⌈K / bk⌉
  FastDivmod taps[NDim];   ///< the phase's taps per dimension
  int output_base[NDim];   ///< dy position of (i = 0, j = 0)
  int tap_dilation[NDim];  ///< dy positions a tap moves back
  int first_tap[NDim];     ///< filter index of j = 0
  int tap_step[NDim];      ///< filter positions a tap moves on
  int filter_pitch[NDim];  ///< flattened filter index per filter position

  /// The phase's taps for K tile kt; the chunk's first channel in *k0.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void tap_of(int kt, int* j, int* k0) const {
    std::uint32_t tap = 0, chunk = 0, rest = 0, jd = 0;
    chunks.divmod(static_cast<std::uint32_t>(kt), &tap, &chunk);
    *k0 = static_cast<int>(chunk) * bk;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) {
      taps[d].divmod(tap, &rest, &jd);
      j[d] = static_cast<int>(jd);
      tap = rest;
    }
  }

  /// dy's box for the M tile whose first grid point is origin = (n, i_1, …, i_NDim); returns the
  /// map's rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int dy_box(const int* origin, int kt, int* c) const {
    int j[NDim], k0 = 0;
    tap_of(kt, j, &k0);
    int r = 0;
    c[r++] = k0;
    if (group >= 0) c[r++] = group;
    HIPGRAD_UNROLL
    for (int d = NDim - 1; d >= 0; --d) c[r++] = output_base[d] + origin[1 + d] - j[d] * tap_dilation[d];
    c[r++] = origin[0];
    return r;
  }

  /// w's box for the panel of columns from c0; returns the map's rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int w_box(int kt, int c0, int* c) const {
    int j[NDim], k0 = 0;
    tap_of(kt, j, &k0);
    int f = 0;
    HIPGRAD_UNROLL
    for (int d = 0; d < NDim; ++d) f += (first_tap[d] + j[d] * tap_step[d]) * filter_pitch[d];
    int r = 0;
    c[r++] = c0;
    c[r++] = f;
    c[r++] = k0;
    if (group >= 0) c[r++] = group;
    return r;
  }
};

/// The epilogue of a boxed sub-problem: its M is tiles × tile_rows, row m = tile·tile_rows + r is
/// row r of the tile's box; element (m, c) goes to dx[n, c, first + i·s] where the row lies inside
/// the phase's grid, converted once from the fp32 sum. Grouped launches do not split K.
template <typename T, int NDim>
struct BoxScatter {
  T* out;  ///< dx of the group at the phase's first position
  Index stride_n;
  Index stride_c;
  Index stride_i[NDim];  ///< dx's stride times the phase's stride s
  BoxGrid<NDim> grid;
  FastDivmod tile_rows;  ///< the GEMM's block M
  int m_size;            ///< tiles × tile_rows
  int n_size;            ///< C
  float* partials;

  /// dx's offset of row m's position at channel 0; false where the row stores nothing.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE bool row_offset(int m, Index* offset) const {
    std::uint32_t tile = 0, row = 0;
    tile_rows.divmod(static_cast<std::uint32_t>(m), &tile, &row);
    int first[NDim + 1], at[NDim + 1];
    grid.origin(static_cast<int>(tile), first);
    if (m >= m_size || !grid.point(first, static_cast<int>(row), at)) return false;
    Index o = static_cast<Index>(at[0]) * stride_n;
    HIPGRAD_UNROLL
    for (int d = 0; d < NDim; ++d) o += static_cast<Index>(at[1 + d]) * stride_i[d];
    *offset = o;
    return true;
  }

  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE void store(int m, int c, float accumulator, int) const {
    Index o = 0;
    if (c >= n_size || !row_offset(m, &o)) return;
    out[o + static_cast<Index>(c) * stride_c] = type_convert<T>(accumulator);
  }

  /// The row's offset once for the run of channels, one 16-byte store where they are contiguous
  /// and aligned.
  HIPGRAD_DEVICE HIPGRAD_INLINE void store_vector(int m, int c, const float* accumulators, int split) const {
    Index o = 0;
    if (!row_offset(m, &o)) return;
    if (stride_c == 1 && c + gemm::kEpilogueVector <= n_size) {
      T* p = out + o + c;
      if (is_vector_aligned<T, kVector16<T>>(p)) return gemm::store_scaled_vector(p, accumulators, 1.0f);
    }
    for (int j = 0; j < gemm::kEpilogueVector; ++j) store(m, c + j, accumulators[j], split);
  }
};

/// A of a boxed sub-problem (box_producer.hpp): per K tile one box of dy's map, the M tile's
/// box of positions at the tap's coordinates.
template <typename T, int NDim>
struct DyBoxes {
  using Element = T;
  static constexpr bool kKContiguous = true;
  const void* map;  ///< dy's tensor map (gemm::TensorMap) with this sub-problem's box, in device memory
  TmaTapCoordinates<NDim> taps;
  BoxGrid<NDim> grid;
  FastDivmod tile_rows;  ///< the GEMM's block M
  int box_rows;          ///< rows one box brings (at most tile_rows)
  int m_extent;          ///< tiles × tile_rows
  int k_extent;          ///< K tiles × bk

  HIPGRAD_HOST_DEVICE int mn_size() const { return m_extent; }
  HIPGRAD_HOST_DEVICE int k_size() const { return k_extent; }
  HIPGRAD_HOST_DEVICE int tile_bytes() const { return box_rows * kTmaRowBytes; }
  HIPGRAD_HOST_DEVICE int copies() const { return 1; }

  /// The box's coordinates for the tile at (m_base, k_base); returns the map's rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int coordinates(int m_base, int k_base, int* c) const {
    std::uint32_t t = 0, row = 0;
    tile_rows.divmod(static_cast<std::uint32_t>(m_base), &t, &row);
    int first[NDim + 1];
    grid.origin(static_cast<int>(t), first);
    return taps.dy_box(first, k_base / taps.bk, c);
  }

  HIPGRAD_DEVICE HIPGRAD_INLINE void load_copy(int, char* tile, int m_base, int k_base, std::uint64_t* barrier) const {
    int c[gemm::TensorMapShape::kMaxRank];
    const int rank = coordinates(m_base, k_base, c);
    gemm::tma_load_box(tile, static_cast<const gemm::TensorMap*>(map), c, rank, barrier);
  }
};

/// B of a boxed sub-problem: per K tile one box of w's map per 128-byte panel of the tile's
/// columns (c; mn_extent = C).
template <typename T, int NDim>
struct WBoxes : PanelBoxes<WBoxes<T, NDim>, T> {
  TmaTapCoordinates<NDim> taps;

  /// Panel p's box coordinates for the tile at (n_base, k_base); returns the map's rank.
  HIPGRAD_HOST_DEVICE HIPGRAD_INLINE int coordinates(int n_base, int k_base, int p, int* c) const {
    return taps.w_box(k_base / taps.bk, n_base + p * (kTmaRowBytes / static_cast<int>(sizeof(T))), c);
  }
};

/// The boxes of a phase's positions for tiles of `rows` rows (position_boxes).
template <int NDim>
PositionBoxes<NDim> box_tiles(const Problem<NDim>& problem, const Phase<NDim>& phase, int rows) {
  std::array<Index, NDim + 1> extent{};
  extent[0] = problem.params.N;
  for (int d = 0; d < NDim; ++d) extent[static_cast<std::size_t>(d) + 1] = phase[d].count;
  return position_boxes<NDim>(extent, rows);
}

/// The boxes of every phase of `problem` (backward_data_phases' order) for tiles of `rows` rows,
/// searched once per convolution, N and tile on this thread.
template <int NDim>
std::vector<PositionBoxes<NDim>> phase_boxes(const Problem<NDim>& problem, int rows) {
  PlanKey<5 * NDim + 4> key = phase_key(problem);
  key.add(problem.params.N).add(rows);
  thread_local RecentPlans<PlanKey<5 * NDim + 4>, std::vector<PositionBoxes<NDim>>> recent;
  return recent.find_or_make(key, [&] {
    ++conv_plan_counts().box_searches;
    std::vector<PositionBoxes<NDim>> boxes;
    for (const Phase<NDim>& phase : backward_data_phases(problem))
      boxes.push_back(box_tiles<NDim>(problem, phase, rows));
    return boxes;
  });
}

/// Whether two phases' boxes have one shape (then one dy map serves both).
template <int NDim>
bool same_box(const PositionBoxes<NDim>& x, const PositionBoxes<NDim>& y) {
  for (int d = 0; d <= NDim; ++d) {
    if (x.shape[d] != y.shape[d]) return false;
  }
  return true;
}

/// The epilogue of group g's sub-problem of `phase`, tiled by `boxes` in tiles of tile_rows rows.
template <typename T, int NDim>
BoxScatter<T, NDim> box_scatter(const Problem<NDim>& problem, T* dx, Index g, const Phase<NDim>& phase,
                                const PositionBoxes<NDim>& boxes, int tile_rows) {
  const std::vector<Index>& s = problem.input_strides;  // [G, N, C, X...]
  BoxScatter<T, NDim> e{};
  Index first = g * s[0];
  for (int d = 0; d < NDim; ++d) {
    first += phase[d].first * s[3 + d];
    e.stride_i[d] = s[3 + d] * problem.params.strides[d];
  }
  e.out = dx + first;
  e.stride_n = s[1];
  e.stride_c = s[2];
  e.grid = box_grid(boxes);
  e.tile_rows = FastDivmod(static_cast<std::uint32_t>(tile_rows));
  e.m_size = static_cast<int>(boxes.tiles() * tile_rows);
  e.n_size = static_cast<int>(problem.params.C);
  e.partials = nullptr;
  return e;
}

/// The coordinates of group g's sub-problem of `phase` (a phase with taps).
template <int NDim>
TmaTapCoordinates<NDim> tma_tap_coordinates(const Problem<NDim>& problem, const Phase<NDim>& phase, Index g,
                                            int element_bytes);

template <typename T, int NDim>
using BoxSubProblem = gemm::SubProblem<DyBoxes<T, NDim>, WBoxes<T, NDim>, BoxScatter<T, NDim>>;

/// The box path's launch: the maps' shapes (0: w's, then dy's, one per distinct box shape) and
/// one sub-problem per group and phase, whose operands point at map i as maps_on_device + 128·i.
template <typename T, int NDim>
struct BoxPlan {
  std::vector<gemm::TensorMapShape> maps;
  std::vector<BoxSubProblem<T, NDim>> problems;
};

/// The plan for blocks of block_m × block_n with B panels panel_bytes apart.
template <typename T, int NDim>
BoxPlan<T, NDim> box_plan(const Problem<NDim>& problem, T* dx, const unsigned char* maps_on_device, int block_m,
                          int block_n, int panel_bytes);

// ---- definitions ---------------------------------------------------------------------------

template <typename T, int NDim>
BoxPlan<T, NDim> box_plan(const Problem<NDim>& problem, T* dx, const unsigned char* maps_on_device, int block_m,
                          int block_n, int panel_bytes) {
  constexpr int kBytes = static_cast<int>(sizeof(T));
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Phase<NDim>> phases = backward_data_phases(problem);
  BoxPlan<T, NDim> plan;
  plan.maps.push_back(w_tensor_map(problem, kBytes));
  const std::vector<PositionBoxes<NDim>> boxes = phase_boxes(problem, block_m);
  std::vector<std::size_t> map_of_phase(phases.size());
  for (std::size_t f = 0; f < phases.size(); ++f) {
    std::size_t at = 0;
    while (at < f && !same_box(boxes[at], boxes[f])) ++at;
    if (at == f) {
      plan.maps.push_back(dy_tensor_map(problem, kBytes, boxes[f]));
      map_of_phase[f] = plan.maps.size() - 1;
    } else {
      map_of_phase[f] = map_of_phase[at];
    }
  }
  for (Index g = 0; g < p.G; ++g) {
    for (std::size_t f = 0; f < phases.size(); ++f) {
      const TmaTapCoordinates<NDim> taps = tma_tap_coordinates<NDim>(problem, phases[f], g, kBytes);
      Index tap_count = 1;
      for (int d = 0; d < NDim; ++d) tap_count *= phases[f][d].taps;
      BoxSubProblem<T, NDim> s{};
      s.a.map = maps_on_device + map_of_phase[f] * kTensorMapBytes;
      s.a.taps = taps;
      s.a.grid = box_grid(boxes[f]);
      s.a.tile_rows = FastDivmod(static_cast<std::uint32_t>(block_m));
      s.a.box_rows = boxes[f].rows();
      s.a.m_extent = static_cast<int>(boxes[f].tiles() * block_m);
      s.a.k_extent = static_cast<int>(tap_count * ceil_div(p.K, static_cast<Index>(taps.bk)) * taps.bk);
      s.b.map = maps_on_device;
      s.b.taps = taps;
      s.b.panels = block_n / (kTmaRowBytes / kBytes);
      s.b.panel_bytes = panel_bytes;
      s.b.mn_extent = static_cast<int>(p.C);
      s.b.k_extent = s.a.k_extent;
      s.epilogue = box_scatter<T, NDim>(problem, dx, g, phases[f], boxes[f], block_m);
      plan.problems.push_back(s);
    }
  }
  return plan;
}

template <int NDim>
const char* backward_data_tma_blocker(const Problem<NDim>& problem, const void* dy, const void* w, int element_bytes) {
  const ConvParams<NDim>& p = problem.params;
  if (problem.output_strides[2] != 1) return "dy's channels are not contiguous (tensor maps read runs of channels)";
  if (problem.weight_strides[2] != 1) return "w's input channels are not contiguous (tensor maps read runs of them)";
  if (2 + NDim + (p.G > 1 ? 1 : 0) > gemm::TensorMapShape::kMaxRank) {
    return "a grouped 3-D dy needs six tensor-map dimensions (five at most)";
  }
  for (int d = 0; d + 1 < NDim; ++d) {
    if (problem.weight_strides[3 + d] != problem.weight_strides[4 + d] * p.filter[d + 1]) {
      return "w's filter is not packed (its taps do not flatten into one tensor-map dimension)";
    }
  }
  const PositionBoxes<NDim> one{};  // the box's shape does not change what TMA allows of dy
  if (const char* blocker = gemm::tensor_map_blocker(dy_tensor_map(problem, element_bytes, one), dy)) return blocker;
  return gemm::tensor_map_blocker(w_tensor_map(problem, element_bytes), w);
}

template <int NDim>
gemm::TensorMapShape dy_tensor_map(const Problem<NDim>& problem, int element_bytes, const PositionBoxes<NDim>& boxes) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.output_strides;  // [G, N, K, O...]
  const auto out = p.output_spatial();
  gemm::TensorMapShape m;
  m.element_bytes = element_bytes;
  auto add = [&m, element_bytes](Index size, Index stride, int box) {
    m.size[m.rank] = size;
    m.stride_bytes[m.rank] = stride * element_bytes;
    m.box[m.rank] = box < 1 ? 1 : box;
    ++m.rank;
  };
  add(p.K, s[2], kTmaRowBytes / element_bytes);
  if (p.G > 1) add(p.G, s[0], 1);
  for (int d = NDim - 1; d >= 0; --d) add(out[static_cast<std::size_t>(d)], s[3 + d], boxes.shape[1 + d]);
  add(p.N, s[1], boxes.shape[0]);
  return m;
}

template <int NDim>
gemm::TensorMapShape w_tensor_map(const Problem<NDim>& problem, int element_bytes) {
  const ConvParams<NDim>& p = problem.params;
  const std::vector<Index>& s = problem.weight_strides;  // [G, K, C, F...]
  Index taps = 1;
  for (int d = 0; d < NDim; ++d) taps *= p.filter[d];
  gemm::TensorMapShape m;
  m.element_bytes = element_bytes;
  const int panel = kTmaRowBytes / element_bytes;
  m.rank = p.G > 1 ? 4 : 3;
  const Index sizes[4] = {p.C, taps, p.K, p.G};
  const Index strides[4] = {s[2], s[2 + NDim], s[1], s[0]};  // f: the last filter dimension's stride
  const int box[4] = {panel, 1, panel, 1};
  for (int d = 0; d < m.rank; ++d) {
    m.size[d] = sizes[d];
    m.stride_bytes[d] = strides[d] * element_bytes;
    m.box[d] = box[d];
  }
  return m;
}

template <int NDim>
TmaTapCoordinates<NDim> tma_tap_coordinates(const Problem<NDim>& problem, const Phase<NDim>& phase, Index g,
                                            int element_bytes) {
  const ConvParams<NDim>& p = problem.params;
  TmaTapCoordinates<NDim> t{};
  t.group = p.G > 1 ? static_cast<int>(g) : -1;
  t.bk = kTmaRowBytes / element_bytes;
  t.chunks = FastDivmod(static_cast<std::uint32_t>(ceil_div(p.K, static_cast<Index>(t.bk))));
  Index pitch = 1;
  for (int d = NDim - 1; d >= 0; --d) {
    t.taps[d] = FastDivmod(static_cast<std::uint32_t>(phase[d].taps));
    t.output_base[d] = static_cast<int>(phase[d].output_base);
    t.tap_dilation[d] = static_cast<int>(phase[d].tap_dilation);
    t.first_tap[d] = static_cast<int>(phase[d].first_tap);
    t.tap_step[d] = static_cast<int>(phase[d].tap_step);
    t.filter_pitch[d] = static_cast<int>(pitch);
    pitch *= p.filter[d];
  }
  return t;
}

}  // namespace hipgrad::conv::detail
