/// @file path_rules.hpp
/// @brief Which mainloop a tile GEMM launch takes: the paths, what a caller asks, and the rules
///        of each path for one product's loaders (the single and grouped launchers apply the same
///        rules, the grouped one to each sub-problem).
#pragma once

#include <climits>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_info.hpp"
#include "hipgrad/core/integer_math.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/gemm/arch/mma_atom.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"
#include "hipgrad/gemm/collective/gather_producer.hpp"
#include "hipgrad/gemm/collective/tma_producer.hpp"
#include "hipgrad/gemm/collective/warp_specialised_consumer.hpp"
#include "hipgrad/gemm/collective/wgmma_mainloop.hpp"
#include "hipgrad/gemm/config.hpp"
#include "hipgrad/gemm/device/launch_core.hpp"
#include "hipgrad/gemm/device/tensor_map.hpp"

namespace hipgrad::gemm {

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

namespace detail {

/// The path rules of Config Cfg on loaders LoaderA, LoaderB: why each path cannot run (null when
/// it can), the first that runs, and each path's tiling and shared memory.
template <typename Cfg, typename LoaderA, typename LoaderB>
struct PathRules {
  using T = typename LoaderA::Element;
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
    if (const char* blocker = detail::shared_memory_blocker(Cfg::template shared_bytes<T>(), device)) return blocker;
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
    if (const char* blocker = detail::warp_specialised_blocker(warp_specialised_shared_bytes(path), device)) {
      return blocker;
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
};

}  // namespace detail
}  // namespace hipgrad::gemm
