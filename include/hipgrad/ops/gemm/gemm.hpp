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
/// Paths: the matrix path for fp16 and bf16, and for fp32 when problem.allow_tf32 — on sm_90a
/// the warp-specialised TMA kernel (tma_mainloop.hpp) where the configuration and layouts allow
/// wgmma, else the cp.async mainloops (wgmma, mma.sync on NVIDIA sm_80+, MFMA on gfx90a/gfx94x);
/// otherwise, or when the device has no matrix atoms, or A/B are not 16-byte aligned (pointers
/// and leading dimensions), the SIMT FMA mainloop. Results are deterministic: split-K partials
/// go to the workspace and are added in a fixed order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/ops/gemm/problem.hpp"
#include "hipgrad/primitives/gemm/epilogue.hpp"
#include "hipgrad/primitives/gemm/operand_loader.hpp"
#include "hipgrad/primitives/gemm/tile_gemm.hpp"
#include "hipgrad/primitives/gemm/tma_mainloop.hpp"

namespace hipgrad::gemm {

enum class Path { kMatrix, kSimt };

inline const char* path_name(Path p) { return p == Path::kMatrix ? "matrix" : "simt"; }

/// T: A, B and C (float, half, bfloat16). Cfg: the matrix mainloop's tiles (the SIMT one is fixed).
/// kAllowTma: on sm_90a, run the warp-specialised TMA kernel (tma_mainloop.hpp) where it
/// applies; false keeps every matrix launch on the cp.async mainloops (tests and benchmarks).
template <typename T, typename Cfg = DefaultConfigFor<T>, bool kAllowTma = true>
class Gemm {
  static_assert(is_storage_type_v<T>, "GEMM data must be float, half or bfloat16");

 public:
  struct Args {
    const T* a = nullptr;
    const T* b = nullptr;
    T* c = nullptr;  ///< read too when beta != 0
  };

  static Status can_implement(const Problem& p, const Args& args) {
    HIPGRAD_RETURN_IF_ERROR(p.validate());
    if (!args.a || !args.b || !args.c) return Status::invalid_argument("A, B and C must not be null");
    if (p.allow_tf32 && !std::is_same_v<T, float>) {
      return Status::invalid_argument(std::string("allow_tf32 applies to fp32 only, the data are ") + type_name<T>());
    }
    if (overlaps(args.c, p.c(), args.a, p.a())) return Status::invalid_argument("C overlaps A");
    if (overlaps(args.c, p.c(), args.b, p.b())) return Status::invalid_argument("C overlaps B");
    const Index tiles = ceil_div(p.m, Index{SimtConfig::kBlockM}) * ceil_div(p.n, Index{SimtConfig::kBlockN});
    if (tiles > 2147483647) return Status::not_supported("more than 2^31 - 1 block tiles");
    if (p.split_k > 65535) return Status::not_supported("split_k above 65535 (the grid's z limit)");
    return Status::ok();
  }

  static std::size_t workspace_size(const Problem& p) {
    if (p.split_k <= 1 || !p.validate().is_ok()) return 0;
    return static_cast<std::size_t>(p.split_k) * static_cast<std::size_t>(p.m) * static_cast<std::size_t>(p.n) *
           sizeof(float);
  }

  /// The path run() takes for these arguments on the current device.
  static Path path(const Problem& p, const Args& args) {
    if (!std::is_same_v<T, float> || p.allow_tf32) {
      int device = 0;
      if (hipGetDevice(&device) != hipSuccess) {
        (void)hipGetLastError();
        return Path::kSimt;
      }
      constexpr int kVector = 16 / static_cast<int>(sizeof(T));
      if (device_has_matrix_atoms(device) && aligned(args.a, p.a(), kVector) && aligned(args.b, p.b(), kVector))
        return Path::kMatrix;
    }
    return Path::kSimt;
  }

  static Status run(const Problem& p, const Args& args, void* workspace, std::size_t workspace_bytes, hipStream_t stream) {
    HIPGRAD_RETURN_IF_ERROR(can_implement(p, args));
    const std::size_t needed = workspace_size(p);
    if (needed > 0 && (workspace == nullptr || workspace_bytes < needed)) {
      return Status::workspace_too_small("split_k=" + std::to_string(p.split_k) + " needs " + std::to_string(needed) +
                                         " bytes of workspace, got " + std::to_string(workspace_bytes));
    }
    const Path chosen = path(p, args);
    const int block_k = chosen == Path::kMatrix ? Cfg::kBlockK : SimtConfig::kBlockK;
    const int k_tiles = static_cast<int>(ceil_div(p.k, Index{block_k}));
    const int per_split = static_cast<int>(ceil_div(k_tiles, p.split_k < k_tiles ? p.split_k : k_tiles));
    const int splits = static_cast<int>(ceil_div(k_tiles, per_split));
    Epilogue epilogue{args.c, p.c().row_stride(), p.c().col_stride(), static_cast<int>(p.m), static_cast<int>(p.n),
                      p.alpha, p.beta, nullptr};
    Epilogue mainloop_epilogue = epilogue;
    if (splits > 1) mainloop_epilogue.partials = static_cast<float*>(workspace);
    const Launch launch{p, args, mainloop_epilogue, per_split, splits, stream};
    const bool a_k_contiguous = p.a_layout == Layout::kRowMajor, b_k_contiguous = p.b_layout == Layout::kColMajor;
    HIPGRAD_RETURN_IF_ERROR(dispatch_layouts(chosen, a_k_contiguous, b_k_contiguous, launch));
    if (splits == 1) return Status::ok();
    const Index elements = p.m * p.n;
    const auto blocks = static_cast<unsigned>(ceil_div(elements, Index{256}) < 4096 ? ceil_div(elements, Index{256}) : 4096);
    reduce_split_k<<<blocks, 256, 0, stream>>>(static_cast<const float*>(workspace), splits, epilogue);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("reduce_split_k");
    return Status::ok();
  }

  /// Whether the matrix path runs the wgmma mainloop for these layouts on the current device
  /// (sm_90a code loaded; fp16/bf16 always, TF32 unless A is column-major and B row-major).
  static bool uses_wgmma(const Problem& p) {
    int device = 0;
    if (hipGetDevice(&device) != hipSuccess) {
      (void)hipGetLastError();
      return false;
    }
    const bool a_k = p.a_layout == Layout::kRowMajor, b_k = p.b_layout == Layout::kColMajor;
    const bool planned = a_k ? (b_k ? wgmma_plan<true, true>() : wgmma_plan<true, false>())
                             : (b_k ? wgmma_plan<false, true>() : wgmma_plan<false, false>());
    return planned && device_runs_wgmma(device);
  }

  /// Whether matrix launches take the warp-specialised TMA kernel: uses_wgmma, kAllowTma and a
  /// driver with tensor maps (the operands' alignment is the matrix path's own condition).
  static bool uses_tma(const Problem& p) {
#if defined(HIPGRAD_BACKEND_CUDA)
    const bool a_k = p.a_layout == Layout::kRowMajor, b_k = p.b_layout == Layout::kColMajor;
    const bool planned = a_k ? (b_k ? tma_plan<true, true>() : tma_plan<true, false>())
                             : (b_k ? tma_plan<false, true>() : tma_plan<false, false>());
    return kAllowTma && planned && uses_wgmma(p) && detail::tensor_map_encoder() != nullptr;
#else
    (void)p;
    return false;
#endif
  }

  /// e.g. "gemm_fp16_nnn_wgmma_tma_128x256x64_w2x4_s4"; the path is the one run() takes on the
  /// current device with aligned operands (pass the arguments for the exact one).
  static std::string name(const Problem& p, const Args& args = aligned_args()) {
    std::string s = std::string("gemm_") + type_name<T>() + (p.allow_tf32 ? "_tf32" : "") + "_" +
                    layout_letter(p.a_layout) + layout_letter(p.b_layout) + layout_letter(p.c_layout) + "_";
    s += path(p, args) == Path::kMatrix
             ? std::string(uses_wgmma(p) ? (uses_tma(p) ? "wgmma_tma" : "wgmma") : kMatrixAtomName) + "_" + Cfg::name()
             : "simt_" + SimtConfig::name();
    if (p.split_k > 1) s += "_splitk" + std::to_string(p.split_k);
    return s;
  }

 private:
  using Epilogue = LinearCombination<T>;

  struct Launch {
    const Problem& p;
    const Args& args;
    Epilogue epilogue;
    int per_split;
    int splits;
    hipStream_t stream;
  };

  template <bool kAK, bool kBK>
  static constexpr bool wgmma_plan() {
    return WgmmaPlan<Cfg, DenseOperand<T, kAK>, DenseOperand<T, kBK>>::kSupported;
  }

  template <bool kAK, bool kBK>
  static constexpr bool tma_plan() {
    return tma_kernel_supported<Cfg, DenseOperand<T, kAK>, DenseOperand<T, kBK>>();
  }

  static Args aligned_args() {
    alignas(16) static const unsigned char dummy[16] = {};
    return Args{reinterpret_cast<const T*>(dummy), reinterpret_cast<const T*>(dummy), nullptr};
  }

  static bool aligned(const T* data, const MatrixDesc& d, int vector) {
    return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && d.leading_dimension() % vector == 0;
  }

  static bool overlaps(const T* c, const MatrixDesc& cd, const T* x, const MatrixDesc& xd) {
    const auto c0 = reinterpret_cast<std::uintptr_t>(c), x0 = reinterpret_cast<std::uintptr_t>(x);
    const auto c_bytes = static_cast<std::uintptr_t>(cd.element_space()) * sizeof(T);
    const auto x_bytes = static_cast<std::uintptr_t>(xd.element_space()) * sizeof(T);
    return c0 < x0 + x_bytes && x0 < c0 + c_bytes;
  }

  static Status dispatch_layouts(Path chosen, bool a_k, bool b_k, const Launch& l) {
    if (a_k && b_k) return launch<true, true>(chosen, l);
    if (a_k) return launch<true, false>(chosen, l);
    if (b_k) return launch<false, true>(chosen, l);
    return launch<false, false>(chosen, l);
  }

  /// Launches the TMA kernel when it applies (else leaves *launched false): a persistent grid
  /// of one block per multiprocessor at most.
  template <bool kAK, bool kBK>
  static Status launch_tma(const DenseOperand<T, kAK>& a, const DenseOperand<T, kBK>& b, const Launch& l, bool* launched) {
    *launched = false;
#if defined(HIPGRAD_BACKEND_CUDA)
    if constexpr (kAllowTma && tma_plan<kAK, kBK>()) {
      using Plan = WgmmaPlan<Cfg, DenseOperand<T, kAK>, DenseOperand<T, kBK>>;
      int device = 0, multiprocessors = 0;
      HIPGRAD_RETURN_IF_HIP_ERROR(hipGetDevice(&device));
      if (!device_runs_wgmma(device)) return Status::ok();
      HIPGRAD_RETURN_IF_HIP_ERROR(hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device));
      const Index items = ceil_div(l.p.m, Index{Cfg::kBlockM}) * ceil_div(l.p.n, Index{Cfg::kBlockN}) * l.splits;
      if (items > 2147483647) return Status::ok();
      TmaOperand<T, kAK> ta{};
      TmaOperand<T, kBK> tb{};
      if (!make_tma_operand<typename Plan::TileA>(ta, a).is_ok() || !make_tma_operand<typename Plan::TileB>(tb, b).is_ok())
        return Status::ok();
      constexpr int kShared = tma_kernel_shared_bytes<Cfg, T>();
      const auto kernel = tma_tile_gemm<Cfg, TmaOperand<T, kAK>, TmaOperand<T, kBK>, Epilogue>;
      HIPGRAD_RETURN_IF_HIP_ERROR(
          hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize, kShared));
      const auto grid = static_cast<unsigned>(items < multiprocessors ? items : multiprocessors);
      kernel<<<grid, tma_kernel_threads<Cfg>(), kShared, l.stream>>>(ta, tb, l.epilogue, l.per_split, l.splits);
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("tma_tile_gemm");
      *launched = true;
    }
#else
    (void)a, (void)b, (void)l;
#endif
    return Status::ok();
  }

  template <bool kAK, bool kBK>
  static Status launch(Path chosen, const Launch& l) {
    const DenseOperand<T, kAK> a{l.args.a, l.p.a().leading_dimension(), static_cast<int>(l.p.m), static_cast<int>(l.p.k)};
    const DenseOperand<T, kBK> b{l.args.b, l.p.b().leading_dimension(), static_cast<int>(l.p.n), static_cast<int>(l.p.k)};
    if (chosen == Path::kMatrix) {
      bool launched = false;
      HIPGRAD_RETURN_IF_ERROR(launch_tma(a, b, l, &launched));
      if (launched) return Status::ok();
      const dim3 grid(static_cast<unsigned>(ceil_div(l.p.m, Index{Cfg::kBlockM}) * ceil_div(l.p.n, Index{Cfg::kBlockN})), 1,
                      static_cast<unsigned>(l.splits));
      constexpr int kShared = Cfg::template shared_bytes<T>();
      const auto kernel = mma_tile_gemm<Cfg, DenseOperand<T, kAK>, DenseOperand<T, kBK>, Epilogue>;
      HIPGRAD_RETURN_IF_HIP_ERROR(
          hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize, kShared));
      kernel<<<grid, matrix_kernel_threads<Cfg>(), kShared, l.stream>>>(a, b, l.epilogue, l.per_split);
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("mma_tile_gemm");
      return Status::ok();
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(l.p.m, Index{SimtConfig::kBlockM}) *
                                          ceil_div(l.p.n, Index{SimtConfig::kBlockN})),
                    1, static_cast<unsigned>(l.splits));
    simt_tile_gemm<<<grid, SimtConfig::kThreads, 0, l.stream>>>(a, b, l.epilogue, l.per_split,
                                                                a.vectors_aligned(4) && b.vectors_aligned(4));
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("simt_tile_gemm");
    return Status::ok();
  }
};

}  // namespace hipgrad::gemm
