/// @file unfold.hpp
/// @brief Host: kAuto's unfolded route, for activations whose channels no 16-byte vector holds
///        whole (a stem's 3 or 4 channels, odd channel counts): x's windows become the columns
///        of one dense GEMM over the output positions, so that the tensor cores run it.
///
/// * Backward-weight: x unfolded into columns [rows, Qp] in the workspace (rows = N × the output
///   positions, Qp = taps × C rounded up to 16 bytes; unfold_kernels.hpp), then
///   dw_columns[K, Qp] = dyᵀ · columns, split along the rows with the partials added in a fixed
///   order, then gathered into dw.
/// * Backward-data: w spread into its columns form [K, Qp], Y[rows, Qp] = dy · w_columns in
///   fp32, then Y folded into dx: each dx element the sum, in the filter's order, of the Y
///   columns of the taps whose windows meet it, rounded once.
///
/// dy is read in place where it is channels-last in whole 16-byte vectors with rows (n, positions)
/// at one stride; else (PyTorch's NCHW, odd K) it is first packed into [rows, K rounded up to 16
/// bytes] in the workspace. One group, 16-bit data or TF32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/common/plain_gemm.hpp"
#include "hipgrad/ops/conv/common/unfold_kernels.hpp"
#include "hipgrad/ops/conv/common/workspace_piece.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/device/launcher.hpp"

namespace hipgrad::conv::detail {

/// The most columns (taps × C) kAuto unfolds: the columns matrix holds each x element about
/// taps / stride^NDim times, which pays while the windows are small next to what the implicit
/// GEMM would pad.
inline constexpr Index kUnfoldMaxColumns = 1024;
/// The largest columns matrix (or fp32 Y) kAuto unfolds into, in bytes.
inline constexpr Index kUnfoldMaxBytes = Index{1} << 32;

/// What the unfolded route computes on: rows (n, output positions...) × columns (tap, c).
struct UnfoldShape {
  Index rows = 0;
  int columns = 0;          ///< taps · C
  int row_columns = 0;      ///< columns rounded up to 16 bytes of T
  int k_columns = 0;        ///< K rounded up to 16 bytes of T: the GEMMs' K (dy) or M (dw)
  bool dy_packed = false;   ///< dy copied into [rows, k_columns] in the workspace (else read in place)
  Index dy_row_stride = 0;  ///< of dy as the GEMMs read it
};

template <typename T, int NDim>
UnfoldShape unfold_shape(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  UnfoldShape s;
  s.rows = p.N;
  Index taps = 1;
  const auto output = p.output_spatial();
  for (int d = 0; d < NDim; ++d) s.rows *= output[d], taps *= p.filter[d];
  const Index columns = taps * p.C;
  s.columns = columns > kUnfoldMaxColumns ? 0 : static_cast<int>(columns);
  const auto vector = static_cast<Index>(16 / sizeof(T));
  s.row_columns = static_cast<int>(round_up(columns, vector));
  s.k_columns = static_cast<int>(round_up(p.K, vector));
  // dy is read in place where its channels are whole vectors, contiguous, and its rows walk
  // memory at one stride of whole vectors; else it is packed first.
  const auto merged = merged_row_stride(p.output_lengths(), problem.output_strides);
  s.dy_packed = !(problem.output_strides[2] == 1 && p.K % vector == 0 && merged && *merged % vector == 0);
  s.dy_row_stride = s.dy_packed ? s.k_columns : *merged;
  return s;
}

/// Why the unfolded route cannot run `problem` (null where it can): one group, at most
/// kUnfoldMaxColumns columns (taps · C) and K, at most kUnfoldMaxBytes of columns, fp32 Y or
/// packed dy, x below 2^32 elements.
template <typename T, int NDim>
const char* unfold_blocker(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  if (p.G != 1) return "it runs one group only";
  if (p.K > kUnfoldMaxColumns) return "more than 1024 channels K";
  const UnfoldShape s = unfold_shape<T>(problem);
  if (s.columns == 0) return "more than 1024 taps times C";
  Index activation = p.G * p.N * p.C;  // the fold's 32-bit element index
  for (int d = 0; d < NDim; ++d) activation *= p.input[d];
  if (activation >= (Index{1} << 32)) return "x has 2^32 elements or more";
  const Index widest = s.row_columns > s.k_columns ? s.row_columns : s.k_columns;
  if (s.rows >= (Index{1} << 31) || s.rows * widest * static_cast<Index>(sizeof(float)) > kUnfoldMaxBytes)
    return "the columns would take more than 4 GiB";
  return nullptr;
}

/// Whether kAuto unfolds `problem` (after the direct kernels and packed groups declined it):
/// 16-bit or TF32 data whose C is not a multiple of 16 bytes (x's channels in any strides), where
/// the route runs (unfold_blocker).
template <typename T, int NDim>
bool unfolds(const Problem<NDim>& problem) {
  const Index vector = 16 / static_cast<Index>(sizeof(T));
  return problem.algorithm == Algorithm::kAuto && (sizeof(T) == 2 || problem.allow_tf32) &&
         problem.params.C % vector != 0 && unfold_blocker<T>(problem) == nullptr;
}

/// The fewest channels K of a problem kAuto unfolds ahead of the direct kernels: the stems of
/// 24 and 32 channels K the direct kernels would take run 1.2–3.9× faster unfolded
/// (bench/log/conv.md); fewer are left to the direct kernels, unmeasured.
inline constexpr Index kUnfoldBeforeDirectK = 16;

/// Whether kAuto unfolds `problem` even where the direct kernels would take it.
template <typename T, int NDim>
bool unfolds_before_direct(const Problem<NDim>& problem) {
  return unfolds<T>(problem) && problem.params.K >= kUnfoldBeforeDirectK;
}

/// Whether a call may take the unfolded route: kAuto's rule, or forced where it runs.
template <typename T, int NDim>
bool may_unfold(const Problem<NDim>& problem) {
  return unfolds<T>(problem) || (problem.algorithm == Algorithm::kUnfold && unfold_blocker<T>(problem) == nullptr);
}

/// The unfolded route's choice for a call: *unfold where it takes it (kAuto's rule and a GEMM plan
/// that runs, or forced), with *gemm = plan_gemm() its GEMM's plan; not ok (the reason) where it
/// is forced and cannot run.
template <typename T, int NDim, typename PlanGemm>
Status choose_unfold(const Problem<NDim>& problem, PlanGemm&& plan_gemm, gemm::TileGemmPlan* gemm, bool* unfold) {
  *unfold = false;
  const bool forced = problem.algorithm == Algorithm::kUnfold;
  if (!forced && !unfolds<T>(problem)) return Status::ok();
  const char* blocker = unfold_blocker<T>(problem);
  if (blocker == nullptr) *gemm = plan_gemm();
  *unfold = blocker == nullptr && gemm->status.is_ok();
  if (!forced || *unfold) return Status::ok();
  return Status::not_supported(std::string("algorithm unfold cannot run: ") +
                               (blocker != nullptr ? blocker : gemm->status.message().c_str()));
}

/// The geometry of the unfolded copies (strides: x's or dx's).
template <int NDim>
UnfoldGeometry<NDim> unfold_geometry(const Problem<NDim>& problem, const UnfoldShape& s) {
  const ConvParams<NDim>& p = problem.params;
  UnfoldGeometry<NDim> u;
  u.groups = static_cast<int>(p.G), u.channels = static_cast<int>(p.C);
  u.taps = s.columns / u.channels, u.row_columns = s.row_columns;
  const auto output = p.output_spatial();
  for (int d = 0; d < NDim; ++d) {
    u.output[d] = static_cast<int>(output[d]), u.input[d] = static_cast<int>(p.input[d]);
    u.filter[d] = static_cast<int>(p.filter[d]), u.stride[d] = static_cast<int>(p.strides[d]);
    u.dilation[d] = static_cast<int>(p.dilations[d]), u.left_pad[d] = static_cast<int>(p.left_pads[d]);
  }
  for (int d = 0; d < 3 + NDim; ++d) u.strides[d] = problem.input_strides[static_cast<std::size_t>(d)];
  return u;
}

/// The fold into dx of `problem` (y and dx set by the caller).
template <typename T, int NDim>
FoldParams<T, NDim> fold_params(const Problem<NDim>& problem, const UnfoldShape& s) {
  const ConvParams<NDim>& p = problem.params;
  FoldParams<T, NDim> fold;
  fold.geometry = unfold_geometry(problem, s);
  fold.elements = p.G * p.N * p.C;
  for (int d = 0; d < NDim; ++d) {
    fold.elements *= p.input[d];
    fold.tap_step[d] = static_cast<int>(p.strides[d] / greatest_common_divisor(p.strides[d], p.dilations[d]));
  }
  return fold;
}

/// The weight copy between `problem`'s weight strides and the columns form.
template <typename T, int NDim>
WeightColumnsParams<T, NDim> weight_columns_params(const Problem<NDim>& problem, const UnfoldShape& s, bool spread) {
  const ConvParams<NDim>& p = problem.params;
  WeightColumnsParams<T, NDim> w;
  w.spread = spread;
  w.k = s.k_columns, w.k_used = static_cast<int>(p.K), w.channels = static_cast<int>(p.C);
  w.taps = s.columns / w.channels, w.row_columns = s.row_columns;
  w.elements = p.G * s.k_columns * s.row_columns;
  for (int d = 0; d < NDim; ++d) w.filter[d] = static_cast<int>(p.filter[d]);
  for (int d = 0; d < 3 + NDim; ++d) w.strides[d] = problem.weight_strides[static_cast<std::size_t>(d)];
  return w;
}

/// Where the unfolded route's buffers lie in the workspace (each 256-byte aligned, from the
/// workspace's first 256-byte-aligned byte): packed dy, then backward-weight's columns and
/// dw_columns with its split partials, or backward-data's w_columns and fp32 Y.
struct UnfoldWorkspace {
  std::size_t first = 0, second = 0, third = 0, total = 0;
};

inline UnfoldWorkspace unfold_workspace(std::size_t first_bytes, std::size_t second_bytes, std::size_t third_bytes) {
  UnfoldWorkspace w;
  w.second = round_up(first_bytes, std::size_t{256});
  w.third = w.second + round_up(second_bytes, std::size_t{256});
  w.total = w.third + third_bytes + 256;
  return w;
}

/// Bytes of packed dy (none where dy is read in place).
template <typename T>
std::size_t packed_dy_bytes(const UnfoldShape& s) {
  return s.dy_packed ? static_cast<std::size_t>(s.rows) * static_cast<std::size_t>(s.k_columns) * sizeof(T) : 0;
}

/// Backward-data's workspace: packed dy, w's columns, then fp32 Y.
template <typename T, int NDim>
UnfoldWorkspace unfold_data_workspace(const Problem<NDim>& problem) {
  const UnfoldShape s = unfold_shape<T>(problem);
  const auto columns = static_cast<std::size_t>(s.row_columns);
  return unfold_workspace(packed_dy_bytes<T>(s), static_cast<std::size_t>(s.k_columns) * columns * sizeof(T),
                          static_cast<std::size_t>(s.rows) * columns * sizeof(float));
}

/// Backward-weight's workspace: packed dy, the columns, then dw's columns and `splits` fp32
/// partials of them (256-byte aligned after dw's columns).
template <typename T, int NDim>
UnfoldWorkspace unfold_weight_workspace(const Problem<NDim>& problem, int splits) {
  const UnfoldShape s = unfold_shape<T>(problem);
  const auto columns = static_cast<std::size_t>(s.row_columns), k = static_cast<std::size_t>(s.k_columns);
  return unfold_workspace(packed_dy_bytes<T>(s), static_cast<std::size_t>(s.rows) * columns * sizeof(T),
                          round_up(k * columns * sizeof(T), std::size_t{256}) +
                              gemm::split_k_workspace_bytes(s.k_columns, s.row_columns, splits));
}

/// The unfolded route's GEMMs on the tile GEMM (Cfg: its tiles); a class template of its own, so
/// that it is instantiated once per type and configuration whatever the rank.
template <typename T, typename Cfg>
struct UnfoldGemms {
  /// Backward-data: Y[rows, Qp] (fp32) = dy[rows, K] · w_columns[K, Qp].
  using DataLauncher = gemm::TileGemmLauncher<Cfg, gemm::DenseOperand<T, true>, gemm::DenseOperand<T, false>,
                                              gemm::LinearCombination<float>>;
  /// Backward-weight: dw_columns[K, Qp] = dyᵀ[K, rows] · columns[rows, Qp].
  using WeightLauncher = gemm::TileGemmLauncher<Cfg, gemm::DenseOperand<T, false>, gemm::DenseOperand<T, false>,
                                                gemm::LinearCombination<T>>;

  struct Data {
    gemm::DenseOperand<T, true> dy;
    gemm::DenseOperand<T, false> w_columns;
    gemm::LinearCombination<float> y;
  };
  struct Weight {
    gemm::DenseOperand<T, false> dy;
    gemm::DenseOperand<T, false> columns;
    gemm::LinearCombination<T> dw_columns;
  };

  static Data data(const UnfoldShape& s, const T* dy, const T* w_columns, float* y) {
    Data g{};
    g.dy = {dy, s.dy_row_stride, static_cast<int>(s.rows), s.k_columns};
    g.w_columns = {w_columns, s.row_columns, s.row_columns, s.k_columns};
    g.y = {y, s.row_columns, 1, static_cast<int>(s.rows), s.row_columns, 1.0f, 0.0f, nullptr};
    return g;
  }
  static Weight weight(const UnfoldShape& s, const T* dy, const T* columns, T* dw_columns) {
    Weight g{};
    g.dy = {dy, s.dy_row_stride, s.k_columns, static_cast<int>(s.rows)};
    g.columns = {columns, s.row_columns, s.row_columns, static_cast<int>(s.rows)};
    g.dw_columns = {dw_columns, s.row_columns, 1, s.k_columns, s.row_columns, 1.0f, 0.0f, nullptr};
    return g;
  }

  static gemm::TileGemmPlan plan_data(const Data& g, const gemm::TileGemmRequest& request) {
    return DataLauncher::plan(g.dy, g.w_columns, request, current_device_info());
  }
  static gemm::TileGemmPlan plan_weight(const Weight& g, const gemm::TileGemmRequest& request) {
    return WeightLauncher::plan(g.dy, g.columns, request, current_device_info());
  }
  static Status launch_data(const gemm::TileGemmPlan& plan, const Data& g, hipStream_t stream);
  static Status launch_weight(const gemm::TileGemmPlan& plan, const Weight& g, float* partials, hipStream_t stream);
};

/// Not inline, as the ops' run.
template <typename T, typename Cfg>
Status UnfoldGemms<T, Cfg>::launch_data(const gemm::TileGemmPlan& plan, const Data& g, hipStream_t stream) {
  return DataLauncher::launch(plan, g.dy, g.w_columns, g.y, nullptr, stream);
}
template <typename T, typename Cfg>
Status UnfoldGemms<T, Cfg>::launch_weight(const gemm::TileGemmPlan& plan, const Weight& g, float* partials,
                                          hipStream_t stream) {
  return WeightLauncher::launch(plan, g.dy, g.columns, g.dw_columns, partials, stream);
}

/// The copy of dy into [rows, k_columns] (from and to set by the caller).
template <typename T, int NDim>
DyRowsParams<T, NDim> dy_rows_params(const Problem<NDim>& problem, const UnfoldShape& s) {
  const ConvParams<NDim>& p = problem.params;
  DyRowsParams<T, NDim> d;
  d.elements = s.rows * s.k_columns;
  d.k = static_cast<int>(p.K), d.k_columns = s.k_columns;
  const auto output = p.output_spatial();
  for (int i = 0; i < NDim; ++i) d.output[i] = static_cast<int>(output[i]);
  for (int i = 0; i < 3 + NDim; ++i) d.strides[i] = problem.output_strides[static_cast<std::size_t>(i)];
  return d;
}

/// dy as the GEMMs read it: in place, or packed into [rows, k_columns] at the workspace's start.
template <typename T, int NDim>
Status unfolded_dy(const Problem<NDim>& problem, const UnfoldShape& s, const T* dy, void* workspace, hipStream_t stream,
                   const T** rows) {
  *rows = dy;
  if (!s.dy_packed) return Status::ok();
  DyRowsParams<T, NDim> pack = dy_rows_params<T>(problem, s);
  pack.from = dy, pack.to = workspace_piece<T>(workspace, 0);
  *rows = pack.to;
  return launch_mapped_copy(pack, stream);
}

/// Backward-data on the unfolded route: dy packed where it must be, w spread into its columns,
/// Y = dy · w_columns, Y folded into dx (every dx element written).
template <typename T, int NDim, typename Cfg>
Status launch_unfolded_data(const gemm::TileGemmPlan& plan, const Problem<NDim>& problem, const T* dy, const T* w,
                            T* dx, void* workspace, hipStream_t stream) {
  const UnfoldShape s = unfold_shape<T>(problem);
  const UnfoldWorkspace at = unfold_data_workspace<T>(problem);
  const T* dy_rows = nullptr;
  HIPGRAD_RETURN_IF_ERROR(unfolded_dy(problem, s, dy, workspace, stream, &dy_rows));
  T* w_columns = workspace_piece<T>(workspace, at.second);
  float* y = workspace_piece<float>(workspace, at.third);
  WeightColumnsParams<T, NDim> spread = weight_columns_params<T, NDim>(problem, s, true);
  spread.from = w, spread.to = w_columns;
  HIPGRAD_RETURN_IF_ERROR(launch_mapped_copy(spread, stream));
  using Gemms = UnfoldGemms<T, Cfg>;
  HIPGRAD_RETURN_IF_ERROR(Gemms::launch_data(plan, Gemms::data(s, dy_rows, w_columns, y), stream));
  FoldParams<T, NDim> fold = fold_params<T>(problem, s);
  fold.y = y, fold.dx = dx;
  return launch_fold(fold, stream);
}

/// Backward-weight on the unfolded route: dy packed where it must be, x unfolded into the
/// columns, dw_columns = dyᵀ · columns in `splits` (plan's), dw gathered from dw_columns.
template <typename T, int NDim, typename Cfg>
Status launch_unfolded_weight(const gemm::TileGemmPlan& plan, int splits, const Problem<NDim>& problem, const T* x,
                              const T* dy, T* dw, void* workspace, hipStream_t stream) {
  const UnfoldShape s = unfold_shape<T>(problem);
  const UnfoldWorkspace at = unfold_weight_workspace<T>(problem, splits);
  const T* dy_rows = nullptr;
  HIPGRAD_RETURN_IF_ERROR(unfolded_dy(problem, s, dy, workspace, stream, &dy_rows));
  T* columns = workspace_piece<T>(workspace, at.second);
  T* dw_columns = workspace_piece<T>(workspace, at.third);
  const std::size_t dw_bytes =
      static_cast<std::size_t>(s.k_columns) * static_cast<std::size_t>(s.row_columns) * sizeof(T);
  float* partials = workspace_piece<float>(workspace, at.third + round_up(dw_bytes, std::size_t{256}));
  UnfoldParams<T, NDim> unfold;
  unfold.x = x, unfold.columns = columns, unfold.rows = s.rows, unfold.geometry = unfold_geometry(problem, s);
  HIPGRAD_RETURN_IF_ERROR(launch_unfold(unfold, stream));
  using Gemms = UnfoldGemms<T, Cfg>;
  HIPGRAD_RETURN_IF_ERROR(Gemms::launch_weight(plan, Gemms::weight(s, dy_rows, columns, dw_columns), partials, stream));
  WeightColumnsParams<T, NDim> gather = weight_columns_params<T, NDim>(problem, s, false);
  gather.from = dw_columns, gather.to = dw;
  return launch_mapped_copy(gather, stream);
}

}  // namespace hipgrad::conv::detail
