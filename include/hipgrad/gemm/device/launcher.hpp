/// @file launcher.hpp
/// @brief The device-level tile GEMM: C = epilogue(A·B) for any two operand loaders and an
///        epilogue, in one of three mainloops (the TMA kernel, the cp.async matrix mainloops,
///        SIMT), with K split over blocks and the partials added in a fixed order.
///
/// An op plans once per call and launches that plan:
///
///   using Launcher = TileGemmLauncher<Cfg, LoaderA, LoaderB, LinearCombination<T>>;
///   const TileGemmPlan plan = Launcher::plan(a, b, request, current_device_info());
///   HIPGRAD_RETURN_IF_ERROR(plan.status);        // not_supported: why the forced path cannot run
///   HIPGRAD_RETURN_IF_ERROR(Launcher::launch(plan, a, b, epilogue, partials, stream));
///
/// The plan reads only what the loaders say about themselves (sizes, vectors_aligned) and what
/// is remembered per device (DeviceInfo, matrix atoms, the sm_90a image, the tensor-map
/// encoder), so planning makes no runtime call. The TMA kernel needs operands with tensor maps
/// (TmaOperandOf: dense operands); other loaders, such as a convolution's implicit im2col, take
/// the gather kernel (the TMA kernel's consumers, a cp.async producer: sm_90a), the cp.async
/// matrix mainloops or SIMT.
///
/// Epilogue: LinearCombination or any type with its members `store`, `partials`, `m_size` and
/// `n_size` (split-K writes raw fp32 sums to `partials`, then reduce_split_k hands their sums to
/// the epilogue with `partials` null).
#pragma once

#include <climits>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

#include "hipgrad/core/dependent_launch.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/kernel_attributes.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"
#include "hipgrad/gemm/config.hpp"
#include "hipgrad/gemm/device/launch_core.hpp"
#include "hipgrad/gemm/device/path_rules.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"
#include "hipgrad/gemm/kernel/matrix_kernel.hpp"
#include "hipgrad/gemm/kernel/reduce_split_k.hpp"
#include "hipgrad/gemm/kernel/simt_kernel.hpp"
#include "hipgrad/gemm/kernel/warp_specialised_kernel.hpp"

namespace hipgrad::gemm {

/// One launch, planned once per call.
struct TileGemmPlan {
  Status status;  ///< not ok: why the forced path (or, rarely, any path) cannot run
  Path path = Path::kSimt;
  bool wgmma = false;  ///< the matrix kernel runs the wgmma mainloop on this device
  int splits = 1;      ///< K splits launched (partials in the workspace when > 1)
  int k_tiles_per_split = 1;
  unsigned blocks = 1;  ///< grid x: one per output tile, or the TMA/gather kernel's persistent grid
  int threads = 1;
  int shared_bytes = 0;       ///< dynamic shared memory per block
  bool simt_vectors = false;  ///< SIMT: every 4-element vector of A and B is aligned
};

/// Bytes of fp32 partials that `split_k` K slices of an m × n product need (0 without a split).
inline std::size_t split_k_workspace_bytes(Index m, Index n, int split_k) {
  if (split_k <= 1 || m <= 0 || n <= 0) return 0;
  return static_cast<std::size_t>(split_k) * static_cast<std::size_t>(m) * static_cast<std::size_t>(n) * sizeof(float);
}

/// The kernel a plan of Config Cfg runs: "wgmma_tma_<tiles>", "wgmma_gather_<tiles>",
/// "wgmma_<tiles>", "mma_<tiles>" (AMD: "mfma_<tiles>") or "simt_<tiles>".
template <typename Cfg>
std::string tile_gemm_kernel_name(const TileGemmPlan& plan) {
  switch (plan.path) {
    case Path::kTma: return "wgmma_tma_" + Cfg::name();
    case Path::kGather: return "wgmma_gather_" + Cfg::name();
    case Path::kMatrix: return std::string(plan.wgmma ? "wgmma" : kMatrixAtomName) + "_" + Cfg::name();
    case Path::kSimt: break;
  }
  return "simt_" + SimtConfig::name();
}

/// Plans and launches the tile GEMM of Config Cfg (the matrix mainloops' tiles; SIMT has its
/// own) on operands LoaderA (M × K) and LoaderB (N × K) with Epilogue.
template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
class TileGemmLauncher {
  using T = typename LoaderA::Element;
  static_assert(std::is_same_v<T, typename LoaderB::Element>, "A and B must share a type");
  static_assert(fits_build_targets<Cfg, T>(),
                "this tile configuration needs more shared memory than a target of this build has (AMD: 64 KB of LDS)");

 public:
  /// The path (forced, or the first of TMA, matrix, SIMT that runs), the split and the grid.
  static TileGemmPlan plan(const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                           const DeviceInfo& device) {
    TileGemmPlan planned;
    if (request.forced) {
      planned.path = *request.forced;
      if (const char* blocker = Rules::blocker_of(planned.path, a, b, request, device)) {
        planned.status =
            Status::not_supported(std::string("algorithm ") + path_name(planned.path) + " cannot run: " + blocker);
      }
    } else {
      planned.path = Rules::choose(a, b, request, device, &planned.status);
    }
    fill_launch(planned, a, b, request, device);
    return planned;
  }

  /// Launches `plan` (made by plan() from these loaders): the mainloop, then for a split K the
  /// fixed-order reduction of the `partials` (split_k_workspace_bytes of them) into the epilogue.
  static Status launch(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                       float* partials, hipStream_t stream) {
    if (!plan.status.is_ok()) return plan.status;
    if (plan.splits > 1 && partials == nullptr) return Status::invalid_argument("split-K partials must not be null");
    Epilogue mainloop_epilogue = epilogue;
    if (plan.splits > 1) mainloop_epilogue.partials = partials;
    HIPGRAD_RETURN_IF_ERROR(launch_mainloop(plan, a, b, mainloop_epilogue, stream));
    if (plan.splits == 1) return Status::ok();
    return launch_reduction(plan, epilogue, partials, stream);
  }

  /// What the compiler gave the mainloop kernel `plan` launches (registers, local memory).
  static KernelResources resources(const TileGemmPlan& plan) {
    switch (plan.path) {
      case Path::kTma:
#if defined(HIPGRAD_BACKEND_CUDA)
        if constexpr (Rules::kTmaKernel) {
          return kernel_resources(
              warp_specialised_tile_gemm<Cfg, StageProducer::kTma, typename TmaOperandOf<LoaderA>::type,
                                         typename TmaOperandOf<LoaderB>::type, Epilogue>);
        }
#endif
        return {};
      case Path::kGather:
#if defined(HIPGRAD_BACKEND_CUDA)
        return kernel_resources(warp_specialised_tile_gemm<Cfg, StageProducer::kGather, LoaderA, LoaderB, Epilogue>);
#else
        return {};
#endif
      case Path::kMatrix: return kernel_resources(mma_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue>);
      case Path::kSimt: break;
    }
    return kernel_resources(simt_tile_gemm<LoaderA, LoaderB, Epilogue>);
  }

 private:
  using Rules = detail::PathRules<Cfg, LoaderA, LoaderB>;

  static void fill_launch(TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                          const DeviceInfo& device) {
    const detail::Tiling t = Rules::tiling_of(plan.path, a, b, request.split_k);
    plan.splits = t.splits;
    plan.k_tiles_per_split = t.k_tiles_per_split;
    const long long items = t.tiles * t.splits;
    switch (plan.path) {
      case Path::kTma:
      case Path::kGather:
        plan.blocks = detail::persistent_blocks(items, device);
        plan.threads = tma_kernel_threads<Cfg>();
        plan.shared_bytes = Rules::warp_specialised_shared_bytes(plan.path);
        plan.wgmma = true;
        break;
      case Path::kMatrix:
        plan.blocks = static_cast<unsigned>(t.tiles);
        plan.threads = matrix_kernel_threads<Cfg>();
        plan.shared_bytes = Cfg::template shared_bytes<T>();
        plan.wgmma = Rules::kWgmmaConfig && device.known && device_runs_wgmma(device.device);
        break;
      case Path::kSimt:
        plan.blocks = static_cast<unsigned>(t.tiles);
        plan.threads = SimtConfig::kThreads;
        plan.simt_vectors = a.vectors_aligned(4) && b.vectors_aligned(4);
        break;
    }
  }

  static Status launch_mainloop(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                                hipStream_t stream) {
    switch (plan.path) {
      case Path::kTma: return launch_tma(plan, a, b, epilogue, stream);
      case Path::kGather: return launch_gather(plan, a, b, epilogue, stream);
      case Path::kMatrix: return launch_matrix(plan, a, b, epilogue, stream);
      case Path::kSimt: break;
    }
    return launch_simt(plan, a, b, epilogue, stream);
  }

  static Status launch_tma(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                           hipStream_t stream) {
#if defined(HIPGRAD_BACKEND_CUDA)
    if constexpr (Rules::kTmaKernel) {
      using Tiles = WgmmaPlan<Cfg, LoaderA, LoaderB>;
      typename TmaOperandOf<LoaderA>::type ta;
      typename TmaOperandOf<LoaderB>::type tb;
      HIPGRAD_RETURN_IF_ERROR(make_tma_operand<typename Tiles::TileA>(ta, a));
      HIPGRAD_RETURN_IF_ERROR(make_tma_operand<typename Tiles::TileB>(tb, b));
      return detail::launch_tile_kernel(
          warp_specialised_tile_gemm<Cfg, StageProducer::kTma, typename TmaOperandOf<LoaderA>::type,
                                     typename TmaOperandOf<LoaderB>::type, Epilogue>,
          "warp_specialised_tile_gemm (TMA)", dim3(plan.blocks), plan.threads, plan.shared_bytes, stream, ta, tb,
          epilogue, plan.k_tiles_per_split, plan.splits);
    } else {
      (void)plan, (void)a, (void)b, (void)epilogue, (void)stream;
      return Status::not_supported("the TMA kernel does not run these operands");
    }
#else
    (void)plan, (void)a, (void)b, (void)epilogue, (void)stream;
    return Status::not_supported("the TMA kernel exists in CUDA builds only");
#endif
  }

  static Status launch_gather(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                              hipStream_t stream) {
#if defined(HIPGRAD_BACKEND_CUDA)
    return detail::launch_tile_kernel(warp_specialised_tile_gemm<Cfg, StageProducer::kGather, LoaderA, LoaderB, Epilogue>,
                                      "warp_specialised_tile_gemm (gather)", dim3(plan.blocks), plan.threads,
                                      plan.shared_bytes, stream, a, b, epilogue, plan.k_tiles_per_split, plan.splits);
#else
    (void)plan, (void)a, (void)b, (void)epilogue, (void)stream;
    return Status::not_supported("the gather kernel exists in CUDA builds only");
#endif
  }

  static Status launch_matrix(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                              hipStream_t stream) {
    return detail::launch_tile_kernel(mma_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue>, "mma_tile_gemm",
                                      dim3(plan.blocks, 1, static_cast<unsigned>(plan.splits)), plan.threads,
                                      plan.shared_bytes, stream, a, b, epilogue, plan.k_tiles_per_split);
  }

  static Status launch_simt(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                            hipStream_t stream) {
    return detail::launch_tile_kernel(simt_tile_gemm<LoaderA, LoaderB, Epilogue>, "simt_tile_gemm",
                                      dim3(plan.blocks, 1, static_cast<unsigned>(plan.splits)), SimtConfig::kThreads,
                                      0, stream, a, b, epilogue, plan.k_tiles_per_split, plan.simt_vectors);
  }

  static Status launch_reduction(const TileGemmPlan& plan, const Epilogue& epilogue, const float* partials,
                                 hipStream_t stream) {
    return launch_split_k_reduction(partials, plan.splits, epilogue, stream);
  }
};

}  // namespace hipgrad::gemm
