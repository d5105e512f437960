/// @file mma_atom.hpp
/// @brief The matrix atoms of the tile GEMM, one per target, and the only place that knows the
///        target: NVIDIA mma.sync (sm_80+: fp16, bf16, TF32), AMD MFMA (gfx90a, gfx94x: fp16,
///        bf16, fp32), and the FMA outer product of the SIMT path (any target, exact fp32).
///
/// A matrix atom is the unit of work of one warp (wavefront): a kM × kN × kK product-accumulate
/// with fp32 accumulators spread over the lanes. It says how its operand fragments are read
/// from a shared-memory OperandTile (load_a / load_b), multiplies (mma), and where accumulator i
/// of a lane lies in the kM × kN block (accumulator), which is all the mainloop and the epilogue
/// need. MatrixAtomFor<T>::type is the atom of the target being compiled; in a pass without
/// matrix instructions (the host pass, sm < 80, gfx1030, ...) it is NoMatrixAtom, and the host
/// never launches a matrix kernel on such a device (device_has_matrix_atoms).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/per_device.hpp"
#include "hipgrad/gemm/arch/smem_layout.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HIPGRAD_GEMM_MMA_SYNC 1
#elif defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define HIPGRAD_GEMM_MFMA 1
#endif

namespace hipgrad::gemm {

/// Where accumulator i of a lane lies in the atom's kM × kN block.
struct AccumulatorCoord {
  int m;
  int n;
};

/// The accumulator map of mma.sync m16n8k{8,16} (groupID g = lane / 4, t = lane % 4), for a
/// 16 × 16 atom made of two n8 halves: i = 4h + q holds (g + 8·(q / 2), 8h + 2t + q % 2).
HIPGRAD_HOST_DEVICE constexpr AccumulatorCoord mma_sync_accumulator(int lane, int i) {
  return {(lane >> 2) + 8 * ((i & 3) >> 1), 8 * (i >> 2) + 2 * (lane & 3) + (i & 1)};
}

/// The accumulator map of MFMA 32x32 (any input type): lane l holds column l % 32 and rows
/// 8·(i / 4) + 4·(l / 32) + i % 4.
HIPGRAD_HOST_DEVICE constexpr AccumulatorCoord mfma32_accumulator(int lane, int i) {
  return {8 * (i >> 2) + 4 * (lane >> 5) + (i & 3), lane & 31};
}

/// Stands in for the matrix atom where the target has none; never executed.
struct NoMatrixAtom {
  static constexpr bool kAvailable = false;
  static constexpr int kM = 1, kN = 1, kK = 1, kLanes = 1, kAccumulators = 1;
  struct A {};
  struct B {};
  template <typename Tile>
  HIPGRAD_DEVICE static void load_a(A&, const char*, int, int, int) {}
  template <typename Tile>
  HIPGRAD_DEVICE static void load_b(B&, const char*, int, int, int) {}
  HIPGRAD_DEVICE static void mma(float (&)[kAccumulators], const A&, const B&) {}
  HIPGRAD_HOST_DEVICE static constexpr AccumulatorCoord accumulator(int, int) { return {0, 0}; }
};

namespace detail {

/// Element (mn, k) of a shared-memory operand tile.
template <typename Tile, typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE T tile_element(const char* tile, int mn, int k) {
  return *reinterpret_cast<const T*>(tile + Tile::offset(mn, k));
}

}  // namespace detail

// ---- NVIDIA: mma.sync (sm_80+) ------------------------------------------------------------------
#if defined(HIPGRAD_GEMM_MMA_SYNC)

namespace detail {

HIPGRAD_DEVICE HIPGRAD_INLINE std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Four 8×8 matrices of 16-bit elements; lane 8j + r gives row r of matrix j.
template <bool kTranspose>
HIPGRAD_DEVICE HIPGRAD_INLINE void ldmatrix_x4(std::uint32_t (&r)[4], const char* row) {
  const std::uint32_t address = shared_address(row);
  if constexpr (kTranspose) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
}

/// A 16 (MN) × 16-byte-pairs (K) block by one ldmatrix.x4: for a K-contiguous tile each lane
/// points at its matrix row; an MN-contiguous tile of 16-bit elements is read transposed.
template <typename Tile, bool kAOrder>
HIPGRAD_DEVICE HIPGRAD_INLINE void load_fragment_x4(std::uint32_t (&r)[4], const char* tile, int mn0, int k0,
                                                    int lane) {
  static_assert(Tile::kKContiguous || Tile::kElementBytes == 2, "ldmatrix.trans moves 16-bit elements only");
  ldmatrix_x4<!Tile::kKContiguous>(r, tile + ldmatrix_x4_row_offset<Tile, kAOrder>(mn0, k0, lane));
}

template <typename T>
HIPGRAD_DEVICE HIPGRAD_INLINE void mma_m16n8k16(float (&c)[8], int n_half, const std::uint32_t (&a)[4],
                                                std::uint32_t b0, std::uint32_t b1) {
  float* d = c + 4 * n_half;
  if constexpr (std::is_same_v<T, hipgrad::half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

HIPGRAD_DEVICE HIPGRAD_INLINE std::uint32_t to_tf32(std::uint32_t fp32_bits) {
  std::uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(__uint_as_float(fp32_bits)));
  return out;
}

/// The 16 (MN) × 8 (K) fp32 block of a TF32 atom, in the register orders of ldmatrix_x4 (A order:
/// a_q = (g + 8·(q % 2), t + 4·(q / 2)); B order: the halves swapped), rounded to TF32.
/// K-contiguous tiles are read with ldmatrix (a 32-bit element is a pair of 16-bit ones);
/// MN-contiguous ones, which ldmatrix cannot transpose at 32 bits, element by element.
template <typename Tile, bool kAOrder>
HIPGRAD_DEVICE HIPGRAD_INLINE void load_tf32_fragment(std::uint32_t (&r)[4], const char* tile, int mn0, int k0,
                                                      int lane) {
  if constexpr (Tile::kKContiguous) {
    load_fragment_x4<Tile, kAOrder>(r, tile, mn0, k0, lane);
  } else {
    HIPGRAD_UNROLL
    for (int q = 0; q < 4; ++q) {
      const int mn_half = kAOrder ? (q & 1) : (q >> 1), k_half = kAOrder ? (q >> 1) : (q & 1);
      r[q] = tile_element<Tile, std::uint32_t>(tile, mn0 + (lane >> 2) + 8 * mn_half, k0 + (lane & 3) + 4 * k_half);
    }
  }
  HIPGRAD_UNROLL
  for (int q = 0; q < 4; ++q) r[q] = to_tf32(r[q]);
}

}  // namespace detail

/// fp16 or bf16: mma.sync.m16n8k16 twice, a 16 × 16 × 16 atom (both n8 halves share A).
template <typename T>
struct MmaSyncAtom16Bit {
  static constexpr bool kAvailable = true;
  static constexpr int kM = 16, kN = 16, kK = 16, kLanes = 32, kAccumulators = 8;
  struct A {
    std::uint32_t r[4];
  };
  struct B {
    std::uint32_t r[4];  ///< {b0, b1} of the first n8 half, then of the second
  };
  template <typename Tile>
  HIPGRAD_DEVICE static void load_a(A& a, const char* tile, int m0, int k0, int lane) {
    detail::load_fragment_x4<Tile, true>(a.r, tile, m0, k0, lane);
  }
  template <typename Tile>
  HIPGRAD_DEVICE static void load_b(B& b, const char* tile, int n0, int k0, int lane) {
    detail::load_fragment_x4<Tile, false>(b.r, tile, n0, k0, lane);
  }
  HIPGRAD_DEVICE static void mma(float (&c)[kAccumulators], const A& a, const B& b) {
    detail::mma_m16n8k16<T>(c, 0, a.r, b.r[0], b.r[1]);
    detail::mma_m16n8k16<T>(c, 1, a.r, b.r[2], b.r[3]);
  }
  HIPGRAD_HOST_DEVICE static constexpr AccumulatorCoord accumulator(int lane, int i) {
    return mma_sync_accumulator(lane, i);
  }
};

/// fp32 as TF32 (opt-in): mma.sync.m16n8k8.tf32 twice, a 16 × 16 × 8 atom. Inputs are rounded
/// to TF32 (nearest, ties away: cvt.rna) after the fragment load; accumulation stays fp32.
struct MmaSyncAtomTf32 {
  static constexpr bool kAvailable = true;
  static constexpr int kM = 16, kN = 16, kK = 8, kLanes = 32, kAccumulators = 8;
  struct A {
    std::uint32_t r[4];
  };
  struct B {
    std::uint32_t r[4];
  };
  template <typename Tile>
  HIPGRAD_DEVICE static void load_a(A& a, const char* tile, int m0, int k0, int lane) {
    detail::load_tf32_fragment<Tile, true>(a.r, tile, m0, k0, lane);
  }
  template <typename Tile>
  HIPGRAD_DEVICE static void load_b(B& b, const char* tile, int n0, int k0, int lane) {
    detail::load_tf32_fragment<Tile, false>(b.r, tile, n0, k0, lane);
  }
  HIPGRAD_DEVICE static void mma(float (&c)[kAccumulators], const A& a, const B& b) {
    HIPGRAD_UNROLL
    for (int h = 0; h < 2; ++h) {
      float* d = c + 4 * h;
      asm volatile(
          "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[2 * h]), "r"(b.r[2 * h + 1]));
    }
  }
  HIPGRAD_HOST_DEVICE static constexpr AccumulatorCoord accumulator(int lane, int i) {
    return mma_sync_accumulator(lane, i);
  }
};

template <typename T>
struct MatrixAtomFor {
  using type = std::conditional_t<std::is_same_v<T, float>, MmaSyncAtomTf32, MmaSyncAtom16Bit<T>>;
};

// ---- AMD: MFMA (gfx90a, gfx94x; wavefront 64) -----------------------------------------------------
#elif defined(HIPGRAD_GEMM_MFMA)

namespace detail {
using MfmaHalf4 = _Float16 __attribute__((ext_vector_type(4)));
using MfmaShort4 = short __attribute__((ext_vector_type(4)));
using MfmaFloat16 = float __attribute__((ext_vector_type(16)));
}  // namespace detail

/// 32 × 32 × kK MFMA: lane l holds A(l % 32, k) and B(k, l % 32) for its k slice
/// (k = kPerLane·(l / 32) + i); the accumulator map is mfma32_accumulator.
template <typename T>
struct MfmaAtom32 {
  static constexpr bool kAvailable = true;
  static constexpr int kPerLane = std::is_same_v<T, float> ? 1 : 4;
  static constexpr int kM = 32, kN = 32, kK = 2 * kPerLane, kLanes = 64, kAccumulators = 16;
  using Element = std::conditional_t<std::is_same_v<T, float>, float, std::uint16_t>;
  struct A {
    Element v[kPerLane];
  };
  using B = A;
  template <typename Tile>
  HIPGRAD_DEVICE static void load_a(A& a, const char* tile, int m0, int k0, int lane) {
    HIPGRAD_UNROLL
    for (int i = 0; i < kPerLane; ++i)
      a.v[i] = detail::tile_element<Tile, Element>(tile, m0 + (lane & 31), k0 + kPerLane * (lane >> 5) + i);
  }
  template <typename Tile>
  HIPGRAD_DEVICE static void load_b(B& b, const char* tile, int n0, int k0, int lane) {
    load_a<Tile>(b, tile, n0, k0, lane);
  }
  HIPGRAD_DEVICE static void mma(float (&c)[kAccumulators], const A& a, const B& b) {
    detail::MfmaFloat16 acc;
    HIPGRAD_UNROLL
    for (int i = 0; i < kAccumulators; ++i) acc[i] = c[i];
    if constexpr (std::is_same_v<T, float>) {
      acc = __builtin_amdgcn_mfma_f32_32x32x2f32(a.v[0], b.v[0], acc, 0, 0, 0);
    } else if constexpr (std::is_same_v<T, half>) {
      detail::MfmaHalf4 av, bv;
      HIPGRAD_UNROLL
      for (int i = 0; i < 4; ++i) {
        av[i] = __builtin_bit_cast(_Float16, a.v[i]);
        bv[i] = __builtin_bit_cast(_Float16, b.v[i]);
      }
      acc = __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, acc, 0, 0, 0);
    } else {
      detail::MfmaShort4 av, bv;
      HIPGRAD_UNROLL
      for (int i = 0; i < 4; ++i) {
        av[i] = static_cast<short>(a.v[i]);
        bv[i] = static_cast<short>(b.v[i]);
      }
      acc = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(av, bv, acc, 0, 0, 0);
    }
    HIPGRAD_UNROLL
    for (int i = 0; i < kAccumulators; ++i) c[i] = acc[i];
  }
  HIPGRAD_HOST_DEVICE static constexpr AccumulatorCoord accumulator(int lane, int i) {
    return mfma32_accumulator(lane, i);
  }
};

template <typename T>
struct MatrixAtomFor {
  using type = MfmaAtom32<T>;
};

#else

template <typename T>
struct MatrixAtomFor {
  using type = NoMatrixAtom;
};

#endif

/// The FMA "atom" of the SIMT path: a thread's kTM × kTN outer product per k, in fp32 FMAs
/// (exact fp32, and what every target without matrix instructions runs).
template <int kTM, int kTN>
struct FmaOuterProduct {
  HIPGRAD_DEVICE HIPGRAD_INLINE static void mma(float (&c)[kTM][kTN], const float (&a)[kTM], const float (&b)[kTN]) {
    HIPGRAD_UNROLL
    for (int i = 0; i < kTM; ++i) {
      HIPGRAD_UNROLL
      for (int j = 0; j < kTN; ++j) c[i][j] = fmaf(a[i], b[j], c[i][j]);
    }
  }
};

/// Lanes of the warp (wavefront) the matrix atoms of this backend use: the host sizes matrix
/// kernels with it. mma.sync is a 32-lane instruction, MFMA a 64-lane one.
#if defined(HIPGRAD_BACKEND_CUDA)
inline constexpr int kMatrixAtomLanes = 32;
inline constexpr const char* kMatrixAtomName = "mma";
#else
inline constexpr int kMatrixAtomLanes = 64;
inline constexpr const char* kMatrixAtomName = "mfma";
#endif

/// Whether `device` runs this backend's matrix atoms: compute capability 8.0 or newer on NVIDIA,
/// gfx90a or gfx94x (wavefront 64) on AMD. A false answer leaves the launcher the FMA path.
inline bool query_matrix_atoms(int device) {
#if defined(HIPGRAD_BACKEND_CUDA)
  int major = 0;
  if (hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  return major >= 8;
#else
  hipDeviceProp_t prop{};
  if (hipGetDeviceProperties(&prop, device) != hipSuccess) {
    (void)hipGetLastError();
    return false;
  }
  const std::string arch = prop.gcnArchName;
  return prop.warpSize == 64 && (arch.rfind("gfx90a", 0) == 0 || arch.rfind("gfx94", 0) == 0);
#endif
}

/// query_matrix_atoms, remembered per device (the AMD query reads all device properties).
inline bool device_has_matrix_atoms(int device) {
  return remembered_per_device(device, [device] { return query_matrix_atoms(device); });
}

}  // namespace hipgrad::gemm
