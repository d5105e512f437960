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
#include "hipgrad/gemm/device/tensor_map.hpp"
#include "hipgrad/gemm/kernel/matrix_kernel.hpp"
#include "hipgrad/gemm/kernel/reduce_split_k.hpp"
#include "hipgrad/gemm/kernel/simt_kernel.hpp"
#include "hipgrad/gemm/kernel/warp_specialised_kernel.hpp"

namespace hipgrad::gemm {

template <typename Cfg, typename LoaderA, typename LoaderB, typename Epilogue>
class GroupedGemmLauncher;

/// The mainloops a launch can take.
enum class Path {
  kTma,     ///< the warp-specialised, persistent TMA kernel (sm_90a)
  kGather,  ///< the same kernel with a cp.async producer for any loader (sm_90a)
  kMatrix,  ///< the cp.async matrix mainloops: wgmma (sm_90a), mma.sync (sm_80+), MFMA (gfx90a/gfx94x)
  kSimt,    ///< the FMA mainloop (any device)
};

inline const char* path_name(Path path) {
  switch (path) {
    case Path::kTma: return "tma";
    case Path::kGather: return "gather";
    case Path::kMatrix: return "matrix";
    case Path::kSimt: return "simt";
  }
  return "unknown";
}

/// What the caller asks of a launch.
struct TileGemmRequest {
  int split_k = 1;             ///< K slices asked for (fewer run when K has fewer tiles)
  bool matrix_units = true;    ///< the data may run on matrix units (false for exact fp32)
  std::optional<Path> forced;  ///< empty: the launcher's choice (TMA, gather, matrix, SIMT)
};

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

namespace detail {

/// Output tiles and the K split of one path's block tile.
struct Tiling {
  long long tiles;
  int k_tiles_per_split;
  int splits;
};

inline Tiling tiling(int m, int n, int k, int block_m, int block_n, int block_k, int split_k) {
  const long long tiles = static_cast<long long>(ceil_div(m, block_m)) * ceil_div(n, block_n);
  const int k_tiles = k > 0 ? ceil_div(k, block_k) : 1;
  const int asked = split_k < 1 ? 1 : split_k < k_tiles ? split_k : k_tiles;
  const int per_split = ceil_div(k_tiles, asked);
  return {tiles, per_split, ceil_div(k_tiles, per_split)};
}

/// Why a grid of `tiles` × `splits` blocks cannot be launched (null when it can).
inline const char* grid_blocker(const Tiling& t) {
  if (t.tiles > INT_MAX) return "more than 2^31 - 1 output tiles";
  if (t.splits > 65535) return "more than 65535 K splits (the grid's z limit)";
  return nullptr;
}

}  // namespace detail

/// Adds `splits` fp32 partials per element of `epilogue` ([split][m][n], m_size × n_size each) in
/// split order and stores each sum through `epilogue` (whose own partials are null), after the
/// grid before it on `stream` (a dependent launch): a grid-stride pass over the outputs, capped
/// so that small blocks do not outnumber the work.
template <typename Epilogue>
Status launch_split_k_reduction(const float* partials, int splits, const Epilogue& epilogue, hipStream_t stream) {
  constexpr Index kThreads = 256, kMaxBlocks = 4096;
  const Index elements = static_cast<Index>(epilogue.m_size) * epilogue.n_size;
  if (elements == 0) return Status::ok();
  const Index blocks = ceil_div(elements, kThreads) < kMaxBlocks ? ceil_div(elements, kThreads) : kMaxBlocks;
  return status_from_hip(launch_dependent(reduce_split_k<Epilogue>, static_cast<unsigned>(blocks),
                                          static_cast<unsigned>(kThreads), 0, stream, partials, splits, epilogue),
                         "launch of reduce_split_k", __FILE__, __LINE__);
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
      if (const char* blocker = blocker_of(planned.path, a, b, request, device)) {
        planned.status =
            Status::not_supported(std::string("algorithm ") + path_name(planned.path) + " cannot run: " + blocker);
      }
    } else {
      planned.path = choose(a, b, request, device, &planned.status);
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
        if constexpr (kTmaKernel) {
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
  // The grouped launcher applies the same path rules to each of its sub-problems.
  template <typename, typename, typename, typename>
  friend class GroupedGemmLauncher;

  static constexpr int kChunkElements = 16 / static_cast<int>(sizeof(T));
  static constexpr bool kWgmmaConfig = WgmmaPlan<Cfg, LoaderA, LoaderB>::kSupported;

  static constexpr bool tma_kernel_runs_config() {
    if constexpr (TmaOperandOf<LoaderA>::kAvailable && TmaOperandOf<LoaderB>::kAvailable) {
      return tma_kernel_supported<Cfg, typename TmaOperandOf<LoaderA>::type, typename TmaOperandOf<LoaderB>::type>();
    } else {
      return false;
    }
  }
  static constexpr bool kTmaKernel = tma_kernel_runs_config();
  static constexpr bool kGatherKernel = gather_kernel_supported<Cfg, LoaderA, LoaderB>();

  static detail::Tiling tiling_of(Path path, const LoaderA& a, const LoaderB& b, int split_k) {
    const int m = a.mn_size(), n = b.mn_size(), k = a.k_size();
    if (path == Path::kSimt) {
      return detail::tiling(m, n, k, SimtConfig::kBlockM, SimtConfig::kBlockN, SimtConfig::kBlockK, split_k);
    }
    return detail::tiling(m, n, k, Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, split_k);
  }

  /// Why the cp.async matrix mainloops cannot run (null when they can).
  static const char* matrix_blocker(const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                                    const DeviceInfo& device) {
    if (!request.matrix_units) return "exact fp32 runs on the FMA units only (the matrix paths need allow_tf32)";
    if (!a.vectors_aligned(kChunkElements) || !b.vectors_aligned(kChunkElements)) {
      return "A and B must be 16-byte aligned for the matrix paths' 16-byte copies (pointers, and leading "
             "dimensions a multiple of 16 bytes)";
    }
    if (!device.known) return "no GPU answered (the matrix paths need a device with matrix atoms)";
    if (!device_has_matrix_atoms(device.device)) {
      return "the device has no matrix atoms (NVIDIA sm_80 or newer, AMD gfx90a or gfx94x)";
    }
    if (static_cast<std::size_t>(Cfg::template shared_bytes<T>()) > device.shared_per_block_opt_in) {
      return "the configuration needs more shared memory per block than the device allows";
    }
    return detail::grid_blocker(tiling_of(Path::kMatrix, a, b, request.split_k));
  }

  static constexpr int warp_specialised_shared_bytes(Path path) {
    if constexpr (kGatherKernel) {
      if (path == Path::kGather) return gather_kernel_shared_bytes<Cfg, LoaderA, LoaderB>();
    }
    return tma_kernel_shared_bytes<Cfg, T>();
  }

  /// What both producers of the warp-specialised kernel need once its loaders and configuration
  /// suit it: code for sm_90a, its shared memory, and a persistent walk of at most 2^31 − 1 work
  /// items (null when it runs).
  static const char* warp_specialised_blocker(Path path, const LoaderA& a, const LoaderB& b,
                                              const TileGemmRequest& request, const DeviceInfo& device) {
    if (!device_runs_wgmma(device.device)) return "the code loaded for this device was not compiled for sm_90a";
    if (static_cast<std::size_t>(warp_specialised_shared_bytes(path)) > device.shared_per_block_opt_in) {
      return "the configuration needs more shared memory per block than the device allows";
    }
    const detail::Tiling t = tiling_of(path, a, b, request.split_k);
    if (t.tiles * t.splits > INT_MAX) return "more than 2^31 - 1 work items (output tiles times K splits)";
    return nullptr;
  }

  /// Why the TMA kernel cannot run (null when it can).
  static const char* tma_blocker(const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                                 const DeviceInfo& device) {
#if defined(HIPGRAD_BACKEND_CUDA)
    if (const char* blocker = matrix_blocker(a, b, request, device)) return blocker;
    if constexpr (!TmaOperandOf<LoaderA>::kAvailable || !TmaOperandOf<LoaderB>::kAvailable) {
      return "the operand loaders have no tensor maps (only dense operands do)";
    } else if constexpr (!kTmaKernel) {
      return "the TMA kernel does not run this configuration in these layouts (wgmma-readable tiles, at most two "
             "consumer warpgroups)";
    } else {
      if (detail::tensor_map_encoder() == nullptr) return "the driver has no cuTensorMapEncodeTiled";
      if (const char* blocker = tma_operand_blocker(a)) return blocker;
      if (const char* blocker = tma_operand_blocker(b)) return blocker;
      return warp_specialised_blocker(Path::kTma, a, b, request, device);
    }
#else
    (void)a, (void)b, (void)request, (void)device;
    return "the TMA kernel exists in CUDA builds only";
#endif
  }

  /// Why the gather kernel cannot run (null when it can).
  static const char* gather_blocker(const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                                    const DeviceInfo& device) {
#if defined(HIPGRAD_BACKEND_CUDA)
    if (const char* blocker = matrix_blocker(a, b, request, device)) return blocker;
    if constexpr (!kGatherKernel) {
      return "the gather kernel does not run this configuration in these layouts (wgmma-readable tiles, at most two "
             "consumer warpgroups)";
    } else {
      return warp_specialised_blocker(Path::kGather, a, b, request, device);
    }
#else
    (void)a, (void)b, (void)request, (void)device;
    return "the gather kernel exists in CUDA builds only";
#endif
  }

  static const char* blocker_of(Path path, const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                                const DeviceInfo& device) {
    if (path == Path::kTma) return tma_blocker(a, b, request, device);
    if (path == Path::kGather) return gather_blocker(a, b, request, device);
    if (path == Path::kMatrix) return matrix_blocker(a, b, request, device);
    return detail::grid_blocker(tiling_of(Path::kSimt, a, b, request.split_k));
  }

  /// The first path that runs; SIMT always does unless the grid is too large (then *status says so).
  static Path choose(const LoaderA& a, const LoaderB& b, const TileGemmRequest& request, const DeviceInfo& device,
                     Status* status) {
    // The gather kernel before the matrix kernels: its producer warpgroup keeps the consumers'
    // wgmma stream going, which the matrix mainloop's per-tile block barriers stop.
    if (tma_blocker(a, b, request, device) == nullptr) return Path::kTma;
    if (gather_blocker(a, b, request, device) == nullptr) return Path::kGather;
    if (matrix_blocker(a, b, request, device) == nullptr) return Path::kMatrix;
    if (const char* blocker = blocker_of(Path::kSimt, a, b, request, device)) *status = Status::not_supported(blocker);
    return Path::kSimt;
  }

  static void fill_launch(TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const TileGemmRequest& request,
                          const DeviceInfo& device) {
    const detail::Tiling t = tiling_of(plan.path, a, b, request.split_k);
    plan.splits = t.splits;
    plan.k_tiles_per_split = t.k_tiles_per_split;
    const long long items = t.tiles * t.splits;
    switch (plan.path) {
      case Path::kTma:
      case Path::kGather:
        plan.blocks = static_cast<unsigned>(items < device.multiprocessors ? items : device.multiprocessors);
        plan.threads = tma_kernel_threads<Cfg>();
        plan.shared_bytes = warp_specialised_shared_bytes(plan.path);
        plan.wgmma = true;
        break;
      case Path::kMatrix:
        plan.blocks = static_cast<unsigned>(t.tiles);
        plan.threads = matrix_kernel_threads<Cfg>();
        plan.shared_bytes = Cfg::template shared_bytes<T>();
        plan.wgmma = kWgmmaConfig && device.known && device_runs_wgmma(device.device);
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
    if constexpr (kTmaKernel) {
      using Tiles = WgmmaPlan<Cfg, LoaderA, LoaderB>;
      typename TmaOperandOf<LoaderA>::type ta;
      typename TmaOperandOf<LoaderB>::type tb;
      HIPGRAD_RETURN_IF_ERROR(make_tma_operand<typename Tiles::TileA>(ta, a));
      HIPGRAD_RETURN_IF_ERROR(make_tma_operand<typename Tiles::TileB>(tb, b));
      const auto kernel = warp_specialised_tile_gemm<Cfg, StageProducer::kTma, typename TmaOperandOf<LoaderA>::type,
                                                     typename TmaOperandOf<LoaderB>::type, Epilogue>;
      HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(plan.shared_bytes)));
      kernel<<<plan.blocks, plan.threads, plan.shared_bytes, stream>>>(ta, tb, epilogue, plan.k_tiles_per_split,
                                                                       plan.splits);
      HIPGRAD_RETURN_IF_LAUNCH_ERROR("warp_specialised_tile_gemm (TMA)");
      return Status::ok();
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
    const auto kernel = warp_specialised_tile_gemm<Cfg, StageProducer::kGather, LoaderA, LoaderB, Epilogue>;
    HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(plan.shared_bytes)));
    kernel<<<plan.blocks, plan.threads, plan.shared_bytes, stream>>>(a, b, epilogue, plan.k_tiles_per_split,
                                                                     plan.splits);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("warp_specialised_tile_gemm (gather)");
    return Status::ok();
#else
    (void)plan, (void)a, (void)b, (void)epilogue, (void)stream;
    return Status::not_supported("the gather kernel exists in CUDA builds only");
#endif
  }

  static Status launch_matrix(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                              hipStream_t stream) {
    const auto kernel = mma_tile_gemm<Cfg, LoaderA, LoaderB, Epilogue>;
    HIPGRAD_RETURN_IF_HIP_ERROR(opt_in_shared_memory(kernel, static_cast<std::size_t>(plan.shared_bytes)));
    const dim3 grid(plan.blocks, 1, static_cast<unsigned>(plan.splits));
    kernel<<<grid, plan.threads, plan.shared_bytes, stream>>>(a, b, epilogue, plan.k_tiles_per_split);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("mma_tile_gemm");
    return Status::ok();
  }

  static Status launch_simt(const TileGemmPlan& plan, const LoaderA& a, const LoaderB& b, const Epilogue& epilogue,
                            hipStream_t stream) {
    const dim3 grid(plan.blocks, 1, static_cast<unsigned>(plan.splits));
    simt_tile_gemm<<<grid, SimtConfig::kThreads, 0, stream>>>(a, b, epilogue, plan.k_tiles_per_split,
                                                              plan.simt_vectors);
    HIPGRAD_RETURN_IF_LAUNCH_ERROR("simt_tile_gemm");
    return Status::ok();
  }

  static Status launch_reduction(const TileGemmPlan& plan, const Epilogue& epilogue, const float* partials,
                                 hipStream_t stream) {
    return launch_split_k_reduction(partials, plan.splits, epilogue, stream);
  }
};

}  // namespace hipgrad::gemm
