/// @file gemm.hpp
/// @brief The GEMM op, C = alpha·A·B + beta·C for fp32, fp16 and bf16 with fp32 accumulation,
///        any row/column-major layouts and leading dimensions: the test vehicle of the tile GEMM.
///
///   using Op = hipgrad::gemm::Gemm<hipgrad::half>;
///   auto problem = hipgrad::gemm::Problem::packed(M, N, K);        // all row-major
///   Op::Args args{a, b, c};
///   HIPGRAD_RETURN_IF_ERROR(Op::can_implement(problem, args));
///   // workspace of Op::workspace_size(problem) bytes (0 unless split_k > 1), then
///   HIPGRAD_RETURN_IF_ERROR(Op::run(problem, args, workspace, bytes, stream));
///
/// The op describes A and B as dense operand loaders and hands them to the tile GEMM launcher
/// (gemm/device/launcher.hpp), which picks the mainloop (problem.algorithm, or with kAuto
/// the TMA kernel, else the cp.async matrix mainloops, else SIMT), splits K and adds the
/// split-K partials in a fixed order: results are deterministic.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/memory_ranges.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/workspace.hpp"
#include "hipgrad/ops/gemm/problem.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/device/launcher.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/config.hpp"

namespace hipgrad::gemm {

namespace detail {

/// The launcher's forced path for an algorithm (none for kAuto).
inline std::optional<Path> forced_path(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTma: return Path::kTma;
    case Algorithm::kGather: return Path::kGather;
    case Algorithm::kMatrix: return Path::kMatrix;
    case Algorithm::kSimt: return Path::kSimt;
    case Algorithm::kAuto: break;
  }
  return std::nullopt;
}

}  // namespace detail

/// T: A, B and C (float, half, bfloat16). Cfg: the matrix mainloops' tiles (SIMT's are fixed).
template <typename T, typename Cfg = DefaultConfigFor<T>>
class Gemm {
  static_assert(is_storage_type_v<T>, "GEMM data must be float, half or bfloat16");

 public:
  using Problem = gemm::Problem;

  struct Args {
    const T* a = nullptr;
    const T* b = nullptr;
    T* c = nullptr;  ///< read too when beta != 0
  };

  static Status can_implement(const Problem& problem, const Args& args) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
    return plan(problem, args).status;
  }

  /// The partials of problem.split_k slices (the most any path launches).
  static std::size_t workspace_size(const Problem& problem) {
    if (!problem.validate().is_ok()) return 0;
    return split_k_workspace_bytes(problem.m, problem.n, problem.split_k);
  }

  static Status run(const Problem& problem, const Args& args, void* workspace, std::size_t workspace_bytes,
                    hipStream_t stream) {
    HIPGRAD_RETURN_IF_ERROR(check_arguments(problem, args));
    const TileGemmPlan planned = plan(problem, args);
    HIPGRAD_RETURN_IF_ERROR(planned.status);
    HIPGRAD_RETURN_IF_ERROR(check_workspace(workspace_size(problem), workspace, workspace_bytes));
    const Epilogue epilogue = epilogue_of(problem, args);
    auto* partials = static_cast<float*>(workspace);
    return with_loaders(problem, args, [&](const auto& a, const auto& b) {
      return LauncherFor<decltype(a), decltype(b)>::launch(planned, a, b, epilogue, partials, stream);
    });
  }

  /// e.g. "gemm_fp16_nnn_wgmma_tma_128x256x64_w2x4_s4": the kernel run() takes for these
  /// arguments on the current device.
  static std::string name(const Problem& problem, const Args& args = Args{}) {
    const TileGemmPlan planned = plan(problem, args);
    std::string s = std::string("gemm_") + type_name<T>() + (problem.allow_tf32 ? "_tf32" : "") + "_" +
                    layout_letter(problem.a_layout) + layout_letter(problem.b_layout) +
                    layout_letter(problem.c_layout) + "_" + tile_gemm_kernel_name<Cfg>(planned);
    if (problem.split_k > 1) s += "_splitk" + std::to_string(problem.split_k);
    return s;
  }

  /// What the compiler gave the kernel run() takes for these arguments (registers, spills).
  static KernelResources resources(const Problem& problem, const Args& args = Args{}) {
    const TileGemmPlan planned = plan(problem, args);
    return with_loaders(problem, args, [&](const auto& a, const auto& b) {
      return LauncherFor<decltype(a), decltype(b)>::resources(planned);
    });
  }

 private:
  using Epilogue = LinearCombination<T>;
  template <typename LoaderA, typename LoaderB>
  using LauncherFor = TileGemmLauncher<Cfg, std::decay_t<LoaderA>, std::decay_t<LoaderB>, Epilogue>;

  /// Everything run() needs of the problem and the pointers before it plans.
  static Status check_arguments(const Problem& problem, const Args& args) {
    HIPGRAD_RETURN_IF_ERROR(problem.validate());
    if (!args.a || !args.b || !args.c) return Status::invalid_argument("A, B and C must not be null");
    if (problem.allow_tf32 && !std::is_same_v<T, float>) {
      return Status::invalid_argument(std::string("allow_tf32 applies to fp32 only, the data are ") + type_name<T>());
    }
    const MemoryRange outputs[] = {{args.c, bytes(problem.c()), "C", sizeof(T)}};
    const MemoryRange inputs[] = {{args.a, bytes(problem.a()), "A", sizeof(T)},
                                  {args.b, bytes(problem.b()), "B", sizeof(T)}};
    return check_memory_ranges(outputs, inputs);
  }

  /// alpha·acc + beta·C stored into C (split-K partials are the launcher's).
  static Epilogue epilogue_of(const Problem& problem, const Args& args) {
    Epilogue e{};
    e.out = args.c;
    e.stride_m = problem.c().row_stride();
    e.stride_n = problem.c().col_stride();
    e.m_size = static_cast<int>(problem.m);
    e.n_size = static_cast<int>(problem.n);
    e.alpha = problem.alpha;
    e.beta = problem.beta;
    e.partials = nullptr;
    return e;
  }

  static std::size_t bytes(const MatrixDesc& d) { return static_cast<std::size_t>(d.element_space()) * sizeof(T); }

  /// The launch plan for the problem, the operands' alignment and the current device.
  static TileGemmPlan plan(const Problem& problem, const Args& args) {
    const DeviceInfo& device = current_device_info();
    TileGemmRequest request;
    request.split_k = problem.split_k;
    request.matrix_units = !std::is_same_v<T, float> || problem.allow_tf32;
    request.forced = detail::forced_path(problem.algorithm);
    return with_loaders(problem, args, [&](const auto& a, const auto& b) {
      return LauncherFor<decltype(a), decltype(b)>::plan(a, b, request, device);
    });
  }

  /// Calls visit(a, b) with A and B as dense operand loaders of their layouts.
  template <typename Visit>
  static auto with_loaders(const Problem& problem, const Args& args, Visit&& visit) {
    const bool a_k = problem.a_layout == Layout::kRowMajor, b_k = problem.b_layout == Layout::kColMajor;
    if (a_k && b_k) return visit(loader_a<true>(problem, args), loader_b<true>(problem, args));
    if (a_k) return visit(loader_a<true>(problem, args), loader_b<false>(problem, args));
    if (b_k) return visit(loader_a<false>(problem, args), loader_b<true>(problem, args));
    return visit(loader_a<false>(problem, args), loader_b<false>(problem, args));
  }

  template <bool kKContiguous>
  static DenseOperand<T, kKContiguous> loader_a(const Problem& problem, const Args& args) {
    return {args.a, problem.a().leading_dimension(), static_cast<int>(problem.m), static_cast<int>(problem.k)};
  }
  template <bool kKContiguous>
  static DenseOperand<T, kKContiguous> loader_b(const Problem& problem, const Args& args) {
    return {args.b, problem.b().leading_dimension(), static_cast<int>(problem.n), static_cast<int>(problem.k)};
  }
};

}  // namespace hipgrad::gemm
