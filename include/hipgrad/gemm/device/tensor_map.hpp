/// @file tensor_map.hpp
/// @brief The host side of TMA: the driver's tensor-map encoder (fetched through the runtime, so
///        that nothing links against libcuda), maps of dense operands (make_tma_operand) kept per
///        host thread for equal arguments, and maps of up to five dimensions from a
///        TensorMapShape (encode_tensor_map_shape).
///
/// A TmaOperand's map has dimension 0 the contiguous one (K of a K-contiguous operand, else MN),
/// dimension 1 the other, the leading dimension as the byte stride. One copy moves a box of one
/// 128-byte panel row (or the whole row when it is shorter) × all rows of an OperandTile,
/// swizzled exactly as SwizzledTile lays it out, so the wgmma descriptors read TMA-filled and
/// cp.async-filled stages alike. Elements outside the operand arrive as zeros, which gives the
/// tile edges at any M, N, K for free. Without TMA (the HIP backend) every map is refused.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"
#include "hipgrad/gemm/arch/tma.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"
#include "hipgrad/gemm/collective/tma_producer.hpp"
#include "hipgrad/gemm/device/tensor_map_shape.hpp"

namespace hipgrad::gemm {

#if defined(HIPGRAD_BACKEND_CUDA)

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

#else

/// No TMA in this backend: every map is refused, with the reason.
template <typename T>
Status encode_tensor_map_shape(const TensorMapShape&, const void*, TensorMap*) {
  return Status::not_supported("TMA exists in CUDA builds only");
}

#endif  // HIPGRAD_BACKEND_CUDA

}  // namespace hipgrad::gemm
