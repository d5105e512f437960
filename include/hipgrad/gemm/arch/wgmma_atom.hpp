/// @file wgmma_atom.hpp
/// @brief sm_90's warpgroup matrix instructions (wgmma.mma_async) for the tile GEMM: shared-memory
///        matrix descriptors of a SwizzledTile, the fences and groups that order the asynchronous
///        MMAs, and one wrapper per shape: m64nNk16 for fp16/bf16 with both operands in shared
///        memory (K- or MN-major), m64nNk8 for TF32 with A in registers and B K-major in shared
///        memory (TF32 operands in shared memory must be K-major), N = 64, 128, 192 or 256.
///
/// wgmma exists on sm_90a only (the architecture-specific target, `CMAKE_CUDA_ARCHITECTURES=90a`):
/// HIPGRAD_GEMM_WGMMA is defined in that device pass alone. A warpgroup is four consecutive warps
/// (128 threads); it computes a 64 × N block whose accumulators lie as in mma.sync's m16n8 tiles
/// (warp w of the group holds rows 16w..16w+15; accumulator 4j + q of a lane holds the element of
/// n8 block j that mma_sync_accumulator(lane, q) names).
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/per_device.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HIPGRAD_GEMM_WGMMA 1
#endif

namespace hipgrad::gemm {

/// The 64-bit shared-memory matrix descriptor of wgmma (PTX ISA, "Matrix Descriptor Format"):
/// start address, leading and stride byte offsets (all in 16-byte units, 14 bits each) and the
/// swizzle mode (1: 128-byte, 2: 64-byte, 3: 32-byte). The base-offset field stays 0: every tile
/// starts on a 1024-byte boundary, so every swizzle pattern starts where the hardware expects.
HIPGRAD_HOST_DEVICE constexpr std::uint64_t wgmma_descriptor(std::uint32_t start, std::uint32_t leading,
                                                             std::uint32_t stride, int swizzle_bytes) {
  const std::uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
  return (static_cast<std::uint64_t>((start & 0x3FFFF) >> 4)) |
         (static_cast<std::uint64_t>((leading & 0x3FFFF) >> 4) << 16) |
         (static_cast<std::uint64_t>((stride & 0x3FFFF) >> 4) << 32) | (mode << 62);
}

/// Descriptor fields of the block at (mn0, k0) of an OperandTile (relative start offset, leading
/// and stride byte offsets), for one wgmma that reads kMN rows along MN and 32 bytes along K.
///  * K-major (K-contiguous) tile: 8-row swizzle atoms of kPanelRowBytes-long rows follow each
///    other along MN (stride = 8 rows); the leading offset is unused. A K step inside the
///    swizzle width moves the start address by its bytes (the hardware swizzles the absolute
///    address, so the pattern stays aligned); K beyond the width moves to the next panel.
///  * MN-major tile (16-bit only): rows are K, panels of 64 elements along MN (leading = the
///    panel size), 8 K rows to the next atom (stride = 1024 bytes). mn0 must start a panel.
struct WgmmaBlock {
  std::uint32_t start;
  std::uint32_t leading;
  std::uint32_t stride;
  int swizzle_bytes;
};
template <typename Tile>
HIPGRAD_HOST_DEVICE constexpr WgmmaBlock wgmma_block(int mn0, int k0) {
  using L = typename Tile::Layout;
  if constexpr (Tile::kKContiguous) {
    const int k_byte = k0 * Tile::kElementBytes;
    const int start =
        (k_byte / L::kPanelRowBytes) * L::kPanelBytes + mn0 * L::kPanelRowBytes + k_byte % L::kPanelRowBytes;
    return {static_cast<std::uint32_t>(start), 16u, static_cast<std::uint32_t>(8 * L::kPanelRowBytes),
            L::kPanelRowBytes};
  } else {
    const int mn_byte = mn0 * Tile::kElementBytes;
    const int start = (mn_byte / L::kPanelRowBytes) * L::kPanelBytes + k0 * L::kPanelRowBytes;
    return {static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(L::kPanelBytes),
            static_cast<std::uint32_t>(8 * L::kPanelRowBytes), L::kPanelRowBytes};
  }
}

/// Whether wgmma can read blocks of kMN rows (MN) from Tile: every K step (32 bytes) inside a
/// panel row, K-major rows of at least 32 bytes, MN-major panels of 128 bytes (64 16-bit
/// elements, kMN a multiple of them), and whole 1024-byte swizzle atoms.
template <typename Tile, int kMN>
constexpr bool wgmma_readable() {
  using L = typename Tile::Layout;
  if (Tile::kBytes % 1024 != 0) return false;
  if (Tile::kKContiguous) return L::kPanelRowBytes >= 32 && kMN % 8 == 0;
  return Tile::kElementBytes == 2 && L::kPanelRowBytes == 128 && kMN % 64 == 0 && Tile::kK % 8 == 0;
}

#if defined(HIPGRAD_BACKEND_CUDA)
namespace detail {
/// 1 in the sm_90a device code (the only one with the wgmma mainloop), 0 in every other pass;
/// the host reads the copy in the image that runs on its device.
static __device__ int wgmma_compiled =
#if defined(HIPGRAD_GEMM_WGMMA)
    1;
#else
    0;
#endif
}  // namespace detail
#endif

/// Whether matrix kernels that can use wgmma do so on `device`: true when the code loaded for
/// it was compiled for sm_90a. Asked once per device (a 4-byte copy from the device image).
inline bool device_runs_wgmma(int device) {
#if defined(HIPGRAD_BACKEND_CUDA)
  return remembered_per_device(device, [] {
    int value = 0;
    if (cudaMemcpyFromSymbol(&value, detail::wgmma_compiled, sizeof(value)) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return value == 1;
  });
#else
  (void)device;
  return false;
#endif
}

#if defined(HIPGRAD_GEMM_WGMMA)

namespace detail {

HIPGRAD_DEVICE HIPGRAD_INLINE std::uint64_t wgmma_descriptor_at(const char* tile, WgmmaBlock b) {
  const auto base = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  return wgmma_descriptor(base + b.start, b.leading, b.stride, b.swizzle_bytes);
}

}  // namespace detail

/// Orders this thread's earlier register accesses (accumulators, A fragments) before the wgmmas
/// that follow; required before the first wgmma of a batch.
HIPGRAD_DEVICE HIPGRAD_INLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// Closes the batch of wgmmas issued since the last commit.
HIPGRAD_DEVICE HIPGRAD_INLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most kPending committed batches are still running.
template <int kPending>
HIPGRAD_DEVICE HIPGRAD_INLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
/// Makes this thread's shared-memory writes (cp.async, stores) visible to the asynchronous proxy
/// that wgmma reads shared memory through; a barrier must follow before other threads' wgmmas.
HIPGRAD_DEVICE HIPGRAD_INLINE void fence_shared_for_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// Keeps the compiler from moving accesses of `x` across a wgmma fence or wait.
HIPGRAD_DEVICE HIPGRAD_INLINE void pin_register(float& x) { asm volatile("" : "+f"(x)::"memory"); }

// The instruction wrappers keep their operand lists laid out by hand.
// clang-format off
#define HIPGRAD_WGMMA_D32(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define HIPGRAD_WGMMA_D64(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define HIPGRAD_WGMMA_D128(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define HIPGRAD_WGMMA_D96(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

/// D (64 × N, fp32) += A·B, A and B described in shared memory; kTransA / kTransB: 1 when the
/// operand is MN-major (M-major A, N-major B), 0 when K-major.
template <typename T, int kN>
struct WgmmaSS;
/// D (64 × N, fp32) += A·B in TF32: A from registers (the m16n8k8 fragment of each warp's 16
/// rows), B K-major in shared memory (its fp32 values are read as TF32: the low 13 mantissa bits
/// are dropped).
template <int kN>
struct WgmmaRSTf32;

template <>
struct WgmmaSS<hipgrad::half, 64> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[32], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, %35, %36;\n}\n"
      : HIPGRAD_WGMMA_D32(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaSS<hipgrad::bfloat16, 64> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[32], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, %35, %36;\n}\n"
      : HIPGRAD_WGMMA_D32(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaRSTf32<64> {
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : HIPGRAD_WGMMA_D32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct WgmmaSS<hipgrad::half, 128> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[64], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, %67, %68;\n}\n"
      : HIPGRAD_WGMMA_D64(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaSS<hipgrad::bfloat16, 128> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[64], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, %67, %68;\n}\n"
      : HIPGRAD_WGMMA_D64(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaRSTf32<128> {
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : HIPGRAD_WGMMA_D64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct WgmmaSS<hipgrad::half, 192> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[96], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
      "%96, %97, p, 1, 1, %99, %100;\n}\n"
      : HIPGRAD_WGMMA_D96(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaSS<hipgrad::bfloat16, 192> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[96], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
      "%96, %97, p, 1, 1, %99, %100;\n}\n"
      : HIPGRAD_WGMMA_D96(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaRSTf32<192> {
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[96], const std::uint32_t (&a)[4], std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, "
      "{%96, %97, %98, %99}, %100, p, 1, 1;\n}\n"
      : HIPGRAD_WGMMA_D96(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

template <>
struct WgmmaSS<hipgrad::half, 256> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[128], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %131, %132;\n}\n"
      : HIPGRAD_WGMMA_D128(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaSS<hipgrad::bfloat16, 256> {
  template <int kTransA, int kTransB>
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[128], std::uint64_t a, std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %131, %132;\n}\n"
      : HIPGRAD_WGMMA_D128(d)
      : "l"(a), "l"(b), "r"(1), "n"(kTransA), "n"(kTransB));
  }
};

template <>
struct WgmmaRSTf32<256> {
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&d)[128], const std::uint32_t (&a)[4], std::uint64_t b) {
    asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
      : HIPGRAD_WGMMA_D128(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  }
};

#undef HIPGRAD_WGMMA_D32
#undef HIPGRAD_WGMMA_D64
#undef HIPGRAD_WGMMA_D96
#undef HIPGRAD_WGMMA_D128
// clang-format on

#endif  // HIPGRAD_GEMM_WGMMA

}  // namespace hipgrad::gemm
