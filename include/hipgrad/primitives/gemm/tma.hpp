/// @file tma.hpp
/// @brief sm_90's tensor memory accelerator (TMA) for the tile GEMM: a host-built tensor map of a
///        dense operand (TmaOperand), the bulk tensor copy of one box into shared memory, and the
///        shared-memory transaction barriers (mbarrier) that tell a consumer when a copy landed
///        and a producer when a stage may be refilled.
///
/// A TmaOperand is a DenseOperand plus a 2-D tensor map over it: dimension 0 the contiguous one
/// (K of a K-contiguous operand, else MN), dimension 1 the other, the leading dimension as the
/// byte stride. One copy moves a box of one 128-byte panel row (or the whole row when it is
/// shorter) × all rows of an OperandTile, swizzled exactly as SwizzledTile lays it out, so the
/// wgmma descriptors read TMA-filled and cp.async-filled stages alike. Elements outside the
/// operand arrive as zeros, which gives the tile edges at any M, N, K for free.
///
/// Everything here exists in the CUDA backend only (HIPGRAD_GEMM_TMA on the device side, the
/// driver's tensor-map encoder on the host side, fetched through the runtime so that nothing
/// links against libcuda). Encoded maps are kept per host thread for equal arguments
/// (detail::encode_tensor_map), so that repeated launches on the same operands skip the encoder.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/primitives/gemm/operand_loader.hpp"
#include "hipgrad/primitives/gemm/smem_layout.hpp"
#include "hipgrad/primitives/gemm/tensor_map_shape.hpp"
#include "hipgrad/primitives/gemm/wgmma_atom.hpp"

#if defined(HIPGRAD_BACKEND_CUDA)
#include <cuda.h>
#endif

namespace hipgrad::gemm {

#if defined(HIPGRAD_BACKEND_CUDA)

/// A dense operand (row- or column-major, see DenseOperand) with a tensor map for TMA copies of
/// Tile-shaped boxes. Passed to kernels as a __grid_constant__ parameter: TMA reads the map from
/// the kernel's parameter space.
template <typename T, bool kKContiguous_>
struct TmaOperand {
  using Element = T;
  using Dense = DenseOperand<T, kKContiguous_>;
  static constexpr bool kKContiguous = kKContiguous_;

  CUtensorMap map;
  Dense dense;

  HIPGRAD_HOST_DEVICE int mn_size() const { return dense.mn_size(); }
  HIPGRAD_HOST_DEVICE int k_size() const { return dense.k_size(); }
};

namespace detail {

using TensorMapEncoder = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                      const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                      CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/// The driver's cuTensorMapEncodeTiled (null when the driver has none), looked up once.
inline TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<TensorMapEncoder>(nullptr);
    }
    return reinterpret_cast<TensorMapEncoder>(function);
  }();
  return encoder;
}

template <typename T>
constexpr CUtensorMapDataType tensor_map_type() {
  if constexpr (std::is_same_v<T, float>)
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  else if constexpr (std::is_same_v<T, hipgrad::half>)
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  else
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
}

}  // namespace detail

/// Why TMA cannot copy tiles of `dense` (null when it can): TMA needs the data 16-byte aligned
/// and a leading dimension that is a multiple of 16 bytes below 2^40 bytes.
template <typename T, bool kKContiguous>
const char* tma_operand_blocker(const DenseOperand<T, kKContiguous>& dense) {
  const auto stride_bytes = static_cast<cuuint64_t>(dense.stride) * sizeof(T);
  if (reinterpret_cast<std::uintptr_t>(dense.data) % 16 != 0 || stride_bytes % 16 != 0) {
    return "an operand is not 16-byte aligned for TMA (pointer and leading dimension)";
  }
  if (stride_bytes >= (cuuint64_t{1} << 40)) return "a leading dimension of 2^40 bytes or more (TMA's stride limit)";
  return nullptr;
}

namespace detail {

/// Everything cuTensorMapEncodeTiled reads for a map of this file: the map is a function of it
/// alone (no device or context state), so an equal key may reuse an encoded map.
struct TensorMapKey {
  const void* data;
  CUtensorMapDataType type;
  cuuint64_t sizes[2];
  cuuint64_t stride_bytes;
  cuuint32_t box[2];
  CUtensorMapSwizzle swizzle;
};

inline bool same_key(const TensorMapKey& x, const TensorMapKey& y) {
  return x.data == y.data && x.type == y.type && x.sizes[0] == y.sizes[0] && x.sizes[1] == y.sizes[1] &&
         x.stride_bytes == y.stride_bytes && x.box[0] == y.box[0] && x.box[1] == y.box[1] && x.swizzle == y.swizzle;
}

struct TensorMapCacheEntry {
  CUtensorMap map;
  TensorMapKey key;
  bool used;
};
inline constexpr int kTensorMapCacheEntries = 16;

/// Encodes the map of `key`, or copies the one this host thread encoded last for an equal key.
/// Per thread (a small ring of the latest maps): no lock on the launch path, and a loop that
/// launches the same operands again finds them.
inline CUresult encode_tensor_map(const TensorMapKey& key, CUtensorMap* map) {
  thread_local TensorMapCacheEntry entries[kTensorMapCacheEntries];  // zero-initialised: unused
  thread_local int next = 0;
  for (const TensorMapCacheEntry& e : entries) {
    if (e.used && same_key(e.key, key)) {
      *map = e.map;
      return CUDA_SUCCESS;
    }
  }
  const TensorMapEncoder encode = tensor_map_encoder();
  if (encode == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  const cuuint64_t strides[1] = {key.stride_bytes};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(map, key.type, 2, const_cast<void*>(key.data), key.sizes, strides, key.box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, key.swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) {
    entries[next] = TensorMapCacheEntry{*map, key, true};
    next = (next + 1) % kTensorMapCacheEntries;
  }
  return r;
}

}  // namespace detail

/// Builds the TmaOperand of `dense` whose copies fill one panel of Tile each. Not ok when the
/// driver has no tensor maps or the operand breaks TMA's rules (tma_operand_blocker).
template <typename Tile, typename T, bool kKContiguous>
Status make_tma_operand(TmaOperand<T, kKContiguous>& out, const DenseOperand<T, kKContiguous>& dense) {
  static_assert(Tile::kKContiguous == kKContiguous, "the tile's orientation must be the operand's");
  using L = typename Tile::Layout;
  if (detail::tensor_map_encoder() == nullptr) return Status::not_supported("the driver has no cuTensorMapEncodeTiled");
  if (const char* blocker = tma_operand_blocker(dense)) return Status::not_supported(blocker);
  const int inner = kKContiguous ? dense.k_extent : dense.mn_extent;
  const int outer = kKContiguous ? dense.mn_extent : dense.k_extent;
  detail::TensorMapKey key{};
  key.data = dense.data;
  key.type = detail::tensor_map_type<T>();
  key.sizes[0] = static_cast<cuuint64_t>(inner);
  key.sizes[1] = static_cast<cuuint64_t>(outer);
  key.stride_bytes = static_cast<cuuint64_t>(dense.stride) * sizeof(T);  // at least a row: Problem::validate checks ld
  key.box[0] = static_cast<cuuint32_t>(L::kPanelRowBytes / sizeof(T));
  key.box[1] = static_cast<cuuint32_t>(Tile::kRows);
  key.swizzle = L::kPanelRowBytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                : L::kPanelRowBytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                : L::kPanelRowBytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                          : CU_TENSOR_MAP_SWIZZLE_NONE;
  out.dense = dense;
  const CUresult r = detail::encode_tensor_map(key, &out.map);
  if (r != CUDA_SUCCESS) return Status::not_supported("cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return Status::ok();
}

/// Encodes a tiled map of `shape` (tensor_map_shape.hpp) over `base`, 128-byte swizzled, zeros
/// outside: not ok where the driver has no encoder, the shape breaks TMA's rules or the driver
/// refuses it.
template <typename T>
Status encode_tensor_map_shape(const TensorMapShape& shape, const void* base, CUtensorMap* map) {
  if (shape.element_bytes != static_cast<int>(sizeof(T)))
    return Status::invalid_argument("a tensor map of another element size");
  if (const char* blocker = tensor_map_blocker(shape, base)) return Status::not_supported(blocker);
  const detail::TensorMapEncoder encode = detail::tensor_map_encoder();
  if (encode == nullptr) return Status::not_supported("the driver has no cuTensorMapEncodeTiled");
  cuuint64_t sizes[TensorMapShape::kMaxRank], strides[TensorMapShape::kMaxRank];
  cuuint32_t box[TensorMapShape::kMaxRank], element_strides[TensorMapShape::kMaxRank];
  for (int d = 0; d < shape.rank; ++d) {
    sizes[d] = static_cast<cuuint64_t>(shape.size[d]);
    if (d > 0) strides[d - 1] = static_cast<cuuint64_t>(shape.stride_bytes[d]);
    box[d] = static_cast<cuuint32_t>(shape.box[d]);
    element_strides[d] = static_cast<cuuint32_t>(shape.element_stride[d]);
  }
  const CUresult r =
      encode(map, detail::tensor_map_type<T>(), static_cast<cuuint32_t>(shape.rank), const_cast<void*>(base), sizes,
             strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return Status::not_supported("cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")");
  return Status::ok();
}

/// A tensor map as the driver encodes it (128 bytes, 64-byte aligned).
using TensorMap = CUtensorMap;

#else

/// A tensor map's storage where the backend has no TMA, so that code holding maps compiles on
/// every backend: nothing encodes one.
struct alignas(64) TensorMap {
  unsigned char bytes[128];
};

/// No TMA in this backend: every map is refused, with the reason.
template <typename T>
Status encode_tensor_map_shape(const TensorMapShape&, const void*, TensorMap*) {
  return Status::not_supported("TMA exists in CUDA builds only");
}

#endif  // HIPGRAD_BACKEND_CUDA

/// The TMA form of an operand loader: `type` (with a tensor map, built by make_tma_operand) where
/// kAvailable. Only dense operands have one, in the CUDA backend; gathered loaders (implicit
/// im2col) have none and take the cp.async mainloops.
template <typename Loader>
struct TmaOperandOf {
  static constexpr bool kAvailable = false;
};
#if defined(HIPGRAD_BACKEND_CUDA)
template <typename T, bool kKContiguous>
struct TmaOperandOf<DenseOperand<T, kKContiguous>> {
  static constexpr bool kAvailable = true;
  using type = TmaOperand<T, kKContiguous>;
};
#endif

#if defined(HIPGRAD_GEMM_WGMMA)
#define HIPGRAD_GEMM_TMA 1

HIPGRAD_DEVICE HIPGRAD_INLINE std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// A shared-memory transaction barrier (PTX mbarrier): completes a phase when `count` arrivals
/// and every byte announced with arrive_expect_bytes have landed.
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_init(std::uint64_t* barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(count) : "memory");
}
/// Makes initialised barriers visible to the asynchronous proxy (TMA) and the other threads; a
/// block barrier must follow.
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
/// One arrival that also announces `bytes` that copies completing on this barrier will bring.
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_arrive_expect_bytes(std::uint64_t* barrier, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}
/// An arrival that the hardware makes once every cp.async this thread has issued so far has
/// landed; it counts toward the barrier's `count` (noinc), so a barrier that `threads` copying
/// threads arrive on this way is initialised with `threads`.
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_arrive_when_copies_land(std::uint64_t* barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
/// A barrier of `threads` threads (whole warps) on hardware barrier `id` (1–15; 0 is the block's):
/// one warpgroup's barrier that the block's other warps never meet.
HIPGRAD_DEVICE HIPGRAD_INLINE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Waits until the phase of parity `parity` has completed (a fresh barrier counts the phase
/// before its first, of parity 1, as completed).
HIPGRAD_DEVICE HIPGRAD_INLINE void mbarrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  const std::uint32_t address = shared_address(barrier);
  std::uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(address), "r"(parity)
                 : "memory");
  } while (done == 0);
}

/// Copies the box at (inner, outer) of `map` to `destination` (swizzled as the map says); the
/// bytes complete on `barrier`. Issued by one thread.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_load_box(void* destination, const CUtensorMap* map, int inner, int outer,
                                                std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(destination)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(barrier))
      : "memory");
}

/// Copies the box of a map of `rank` dimensions (2 to 5) at coordinates c (innermost first) to
/// `destination`; the bytes complete on `barrier`. Issued by one thread.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_load_box(void* destination, const CUtensorMap* map, const int* c, int rank,
                                                std::uint64_t* barrier) {
  const std::uint32_t to = shared_address(destination), bar = shared_address(barrier);
  const auto from = reinterpret_cast<std::uint64_t>(map);
  switch (rank) {
    case 3:
      asm volatile(
          "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
          "[%5];\n" ::"r"(to),
          "l"(from), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(bar)
          : "memory");
      return;
    case 4:
      asm volatile(
          "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
          "[%6];\n" ::"r"(to),
          "l"(from), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(bar)
          : "memory");
      return;
    case 5:
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, "
          "%6}], [%7];\n" ::"r"(to),
          "l"(from), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]), "r"(bar)
          : "memory");
      return;
    default: tma_load_box(destination, map, c[0], c[1], barrier);
  }
}

/// Makes a tensor map in global memory, written before the kernel started (a copy from the
/// host), visible to this thread's tensor copies: the tensor-map proxy is not synchronised at a
/// kernel's start.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_acquire_map(const CUtensorMap* map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(reinterpret_cast<std::uint64_t>(map))
               : "memory");
}

/// Fetches a tensor map into the descriptor cache ahead of its first use.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

/// Copies the Tile-shaped stage of operand `op` at (mn_base, k_base): one box per 128-byte panel.
template <typename Tile, typename T, bool kKContiguous>
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_load_tile(char* tile, const TmaOperand<T, kKContiguous>& op, int mn_base,
                                                 int k_base, std::uint64_t* barrier) {
  using L = typename Tile::Layout;
  constexpr int kPanels = L::kRowBytes / L::kPanelRowBytes;
  constexpr int kPanelElements = L::kPanelRowBytes / static_cast<int>(sizeof(T));
  const int inner = kKContiguous ? k_base : mn_base, outer = kKContiguous ? mn_base : k_base;
  HIPGRAD_UNROLL
  for (int p = 0; p < kPanels; ++p)
    tma_load_box(tile + p * L::kPanelBytes, &op.map, inner + p * kPanelElements, outer, barrier);
}

/// Lowers (dec) or raises (inc) the registers per thread of the calling warpgroup; every thread
/// of the warpgroup executes it. ptxas allocates the code that follows within the new count.
template <int kRegisters>
HIPGRAD_DEVICE HIPGRAD_INLINE void warpgroup_registers_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
HIPGRAD_DEVICE HIPGRAD_INLINE void warpgroup_registers_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

#endif  // HIPGRAD_GEMM_WGMMA

#if !defined(HIPGRAD_GEMM_TMA)
/// Without TMA (the HIP backend, nvcc's host pass, targets other than sm_90a) a box copy cannot be
/// issued: operands that copy boxes still compile, and box_kernel_blocker keeps their kernels
/// from running.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_load_box(void*, const TensorMap*, const int*, int, std::uint64_t*) {
#if defined(HIPGRAD_BACKEND_CUDA)
  __trap();
#else
  __builtin_trap();
#endif
}
#endif

}  // namespace hipgrad::gemm
