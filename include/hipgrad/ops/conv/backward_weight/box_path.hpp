/// @file box_path.hpp
/// @brief Host: backward-weight's box path (x and dy copied by TMA boxes of output positions:
///        boxes.hpp, gemm's box producer) — its tile configurations, its geometry
///        made once per problem and device, its checks and its launch; and the splits rule the
///        op's gather paths share.
#pragma once

#include <cstddef>
#include <string>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/plan_cache.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/ops/conv/backward_weight/sub_problems.hpp"
#include "hipgrad/ops/conv/backward_weight/boxes.hpp"
#include "hipgrad/ops/conv/common/op_checks.hpp"
#include "hipgrad/ops/conv/common/plan_key.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/device/box_launcher.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::conv::detail {

/// Whether dy's k and x's c are contiguous: vectors (and boxes) run along them.
template <int NDim>
bool weight_channels_contiguous(const Problem<NDim>& problem) {
  return problem.output_strides[2] == 1 && problem.input_strides[2] == 1;
}

/// problem.split_k, or auto_splits over the GEMM of extents e (its positions: e.positions) in
/// blocks of C, against the current device's multiprocessors.
template <typename C, int NDim>
int weight_splits(const Problem<NDim>& problem, const WeightExtents& e) {
  if (problem.split_k > 0) return problem.split_k;
  const Index tiles =
      problem.params.G * ceil_div(e.m, static_cast<Index>(C::kBlockM)) * ceil_div(e.n, static_cast<Index>(C::kBlockN));
  const DeviceInfo& device = current_device_info();
  const int multiprocessors = device.known ? device.multiprocessors : 1;
  return auto_splits(tiles, e.positions, problem.params.G * e.m * e.n, C::kBlockK, multiprocessors);
}

/// The box path of BackwardWeight<T, NDim, Cfg>.
template <typename T, int NDim, typename Cfg>
struct WeightBoxPath {
  using Problem = conv::Problem<NDim>;

  using BoxA = DyBoxRows<T, NDim>;
  using BoxB = XBoxPatches<T, NDim>;
  using BoxSubProblem = WeightBoxSubProblem<T, NDim>;
  static constexpr int kBoxRows = kTmaRowBytes / static_cast<int>(sizeof(T));  ///< positions a K tile
  static constexpr std::size_t kMapBytes = 2 * kTensorMapBytes;                ///< dy's and x's maps
  /// Whether C's tiles are whole panels: a K tile of kBoxRows positions, blocks of whole panels.
  template <typename C>
  static constexpr bool box_tiles_of() {
    return C::kBlockK == kBoxRows && C::kBlockM % kBoxRows == 0 && C::kBlockN % kBoxRows == 0;
  }
  static constexpr bool kBoxTiles = box_tiles_of<Cfg>();

  /// TF32 blocks for a K (dy's channels, the GEMM's M) of at most half of Cfg's block M
  /// (gemm::HalfTallTile; fp16/bf16 blocks are 128 rows tall already).
  using HalfTallCfg = gemm::HalfTallTile<Cfg>;
  static constexpr bool half_tall_available() {
    if constexpr (sizeof(T) != 4 || Cfg::kWarpsM < 2) {
      return false;
    } else {
      return box_tiles_of<HalfTallCfg>() && gemm::tma_kernel_supported<HalfTallCfg, BoxA, BoxB>();
    }
  }
  static bool half_tall(const Problem& problem) {
    return half_tall_available() && problem.params.K <= HalfTallCfg::kBlockM;
  }

  /// fp16/bf16 blocks three-quarters as wide, with a stage more (gemm::ThreeQuarterWideTile):
  /// for taps × Cp that Cfg's blocks would pad by at least 20 % more columns than these (576
  /// columns of a 3 × 3 filter over 64 channels: 768 against 576). A K tile of these brings
  /// almost as many bytes and barriers as one of Cfg's, so a small saving of columns does not pay.
  using ThreeQuarterWideCfg = gemm::ThreeQuarterWideTile<Cfg>;
  static constexpr bool three_quarter_wide_available() {
    // Nested, so that a configuration without whole panels (AMD's) never instantiates the
    // TMA kernel's plan.
    if constexpr (sizeof(T) != 2 || Cfg::kBlockN % 4 != 0 || !box_tiles_of<ThreeQuarterWideCfg>()) {
      return false;
    } else {
      return gemm::tma_kernel_supported<ThreeQuarterWideCfg, BoxA, BoxB>();
    }
  }
  static bool three_quarter_wide(const Problem& problem) {
    if (!three_quarter_wide_available()) return false;
    const Index n = weight_extents<NDim>(problem, panel_channels<T>(problem.params.C)).n;
    const Index wide = round_up(n, static_cast<Index>(Cfg::kBlockN));
    const Index narrower = round_up(n, static_cast<Index>(ThreeQuarterWideCfg::kBlockN));
    return wide * 5 >= narrower * 6;
  }

  /// visit(BoxCfg{}) with the box path's configuration for `problem`.
  template <typename Visit>
  static auto with_config(const Problem& problem, Visit&& visit) {
    if constexpr (half_tall_available()) {
      if (half_tall(problem)) return visit(HalfTallCfg{});
    }
    if constexpr (three_quarter_wide_available()) {
      if (three_quarter_wide(problem)) return visit(ThreeQuarterWideCfg{});
    }
    return visit(Cfg{});
  }

  /// The box path's workspace: the sub-problem table, the two maps (128-byte aligned), then with
  /// several splits their fp32 sums (256-byte aligned).
  struct Layout {
    std::size_t maps = 0;
    std::size_t staged = 0;  ///< the table and the maps, one copy a launch
    std::size_t sums = 0;
    std::size_t total = 0;
  };

  /// What the box path makes of `problem` on the device before it looks at the pointers: the
  /// boxes of output positions (a search over their shapes), the GEMM (C padded to a panel,
  /// positions in whole boxes), the splits, the workspace's layout, the two maps' shapes, and
  /// `status`: not ok where the path cannot run the problem, whatever the pointers.
  struct Geometry {
    Status status;
    PositionBoxes<NDim> boxes{};
    WeightExtents extents{};
    int splits = 1;
    Layout layout;
    gemm::TensorMapShape maps[2];  ///< dy's, x's (where status is ok)
  };

  /// The problem's geometry, made once per problem and device on this thread
  /// (core/plan_cache.hpp): a call asks for it several times (workspace_size, the box status, the
  /// launch), and a loop makes the same call again.
  static Geometry geometry(const Problem& problem) {
    if (!may_run(problem)) return Geometry{};
    const DeviceInfo& device = current_device_info();
    thread_local RecentPlans<ConvPlanKey, Geometry> recent;
    return recent.find_or_make(conv_plan_key(device, problem), [&] { return make_geometry(problem); });
  }

  static Geometry make_geometry(const Problem& problem) {
    ++conv_plan_counts().box_searches;
    Geometry g;
    g.boxes = weight_position_boxes(problem, kBoxRows);
    g.extents = weight_extents<NDim>(problem, panel_channels<T>(problem.params.C));
    g.extents.positions = g.boxes.tiles() * kBoxRows;
    g.splits = with_config(problem, [&](auto config) { return weight_splits<decltype(config)>(problem, g.extents); });
    const int count = static_cast<int>(problem.params.G * g.splits);
    g.layout.maps = gemm::grouped_tail_offset<BoxSubProblem>(count);  // where the box launch puts them
    g.layout.staged = gemm::grouped_tail_workspace_bytes<BoxSubProblem>(count, kMapBytes);
    g.layout.sums = round_up(g.layout.staged, std::size_t{256});
    g.layout.total = g.splits == 1
                         ? g.layout.staged
                         : g.layout.sums + static_cast<std::size_t>(g.splits) *
                                               static_cast<std::size_t>(problem.params.G * g.extents.m * g.extents.n) *
                                               sizeof(float);
    g.status = geometry_status(problem, g);
    if (g.status.is_ok()) {
      g.maps[0] = dy_box_map(problem, static_cast<int>(sizeof(T)), g.boxes);
      g.maps[1] = x_box_map(problem, static_cast<int>(sizeof(T)), g.boxes);
    }
    return g;
  }

  /// Whether run() may take the box path for `problem` (before what the pointers and the device
  /// allow): forced, or kAuto with fp16/bf16 or TF32 and contiguous channels.
  static bool may_run(const Problem& problem) {
    if (problem.algorithm == Algorithm::kTmaBoxes) return true;
    return problem.algorithm == Algorithm::kAuto && (sizeof(T) == 2 || problem.allow_tf32) &&
           weight_channels_contiguous(problem);
  }

  /// One evaluation of status() for a call: *boxes where the call takes the box path; not ok
  /// (the reason) where it is forced and cannot run.
  static Status choose(const Problem& problem, const T* x, const T* dy, const Geometry& geometry, bool* boxes) {
    return choose_path(
        may_run(problem), problem.algorithm == Algorithm::kTmaBoxes, [&] { return status(x, dy, geometry); }, boxes);
  }

  static constexpr const char* kNoBoxes = "algorithm tma_boxes cannot run: ";

  /// ok where the box path runs the problem of `geometry` with these pointers here.
  static Status status(const T* x, const T* dy, const Geometry& geometry) {
    HIPGRAD_RETURN_IF_ERROR(geometry.status);
    const char* b = gemm::tensor_map_blocker(geometry.maps[0], dy);
    if (b == nullptr) b = gemm::tensor_map_blocker(geometry.maps[1], x);
    return b == nullptr ? Status::ok() : Status::not_supported(kNoBoxes + std::string(b));
  }

  /// The part of status() that the pointers do not enter.
  static Status geometry_status(const Problem& problem, const Geometry& g) {
    const std::string no = kNoBoxes;
    // What the problem allows first, so that every backend gives these reasons.
    if (sizeof(T) == 4 && !problem.allow_tf32) {
      return Status::not_supported(no + "exact fp32 has no box path (its products are TF32's)");
    }
    if (const char* b = backward_weight_box_blocker(problem, static_cast<int>(sizeof(T)), g.boxes))
      return Status::not_supported(no + b);
    constexpr Index kLimit = (Index{1} << 31) - 1;
    if (g.extents.positions > kLimit) return Status::not_supported(no + "the boxes' positions exceed 2^31 - 1");
    if (g.extents.n > kLimit) return Status::not_supported(no + "filter taps times C (padded) exceed 2^31 - 1");
    const Status splits = check_split_sums(problem.params.G, g.splits, g.extents.m * g.extents.n);
    if (!splits.is_ok()) return Status::not_supported(no + splits.message());
    if (!kBoxTiles) return Status::not_supported(no + "its tiles are not 128-byte panels");
    return with_config(problem, [&](auto config) {
      if (const char* b = gemm::box_kernel_blocker<decltype(config), BoxA, BoxB>())
        return Status::not_supported(no + b);
      return Status::ok();
    });
  }

  /// Runs the problem of `geometry` on the box path (dw whole; several splits reduced in order).
  static Status run(const Problem& problem, const T* x, const T* dy, T* dw, const Geometry& geometry, void* workspace,
                    hipStream_t stream) {
    return with_config(problem, [&](auto config) {
      return run_in<decltype(config)>(problem, x, dy, dw, geometry, workspace, stream);
    });
  }
  template <typename BoxCfg>
  static Status run_in(const Problem& problem, const T* x, const T* dy, T* dw, const Geometry& geometry,
                       void* workspace, hipStream_t stream);
};

template <typename T, int NDim, typename Cfg>
template <typename BoxCfg>
Status WeightBoxPath<T, NDim, Cfg>::run_in(const Problem& problem, const T* x, const T* dy, T* dw,
                                           const Geometry& geometry, void* workspace, hipStream_t stream) {
  if constexpr (box_tiles_of<BoxCfg>()) {
    using Plan = gemm::WgmmaPlan<BoxCfg, BoxA, BoxB>;
    // A panel lands as kBoxRows rows of 128 bytes (MN-major; fp32's B is turned K-major in place).
    constexpr int kPanelBytes = kBoxRows * kTmaRowBytes;
    static_assert(Plan::TileA::Layout::kPanelBytes == kPanelBytes, "one panel size");
    static_assert(sizeof(gemm::TensorMap) == kTensorMapBytes, "the workspace holds 128-byte tensor maps");
    const int splits = geometry.splits;
    const Layout& l = geometry.layout;
    auto* base = static_cast<unsigned char*>(workspace);
    float* sums = splits > 1 ? reinterpret_cast<float*>(base + l.sums) : nullptr;
    const WeightBoxPlan<T, NDim> plan = weight_box_plan<T, NDim>(
        problem, geometry.boxes, dw, base + l.maps, BoxCfg::kBlockM, BoxCfg::kBlockN, kPanelBytes, splits, sums);
    gemm::TensorMap maps[2];
    HIPGRAD_RETURN_IF_ERROR(gemm::encode_tensor_map_shape<T>(plan.maps[0], dy, &maps[0]));
    HIPGRAD_RETURN_IF_ERROR(gemm::encode_tensor_map_shape<T>(plan.maps[1], x, &maps[1]));
    HIPGRAD_RETURN_IF_ERROR(gemm::launch_grouped_box_gemm<BoxCfg>(plan.problems.data(),
                                                                  static_cast<int>(plan.problems.size()), maps, 2,
                                                                  workspace, l.staged, current_device_info(), stream));
    if (splits == 1) return Status::ok();
    return gemm::launch_split_k_reduction(sums, splits,
                                          dw_store<T, NDim>(problem, dw, panel_channels<T>(problem.params.C)), stream);
  } else {
    (void)problem, (void)x, (void)dy, (void)dw, (void)geometry, (void)workspace, (void)stream;
    return Status::not_supported("algorithm tma_boxes: tiles that are not 128-byte panels");
  }
}

}  // namespace hipgrad::conv::detail
