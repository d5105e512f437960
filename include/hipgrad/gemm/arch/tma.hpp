/// @file tma.hpp
/// @brief sm_90's tensor memory accelerator as PTX: the bulk tensor copy of one box into shared
///        memory, the shared-memory transaction barriers (mbarrier) that tell a consumer when a
///        copy landed and a producer when a stage may be refilled, named barriers, the
///        tensor-map fences and setmaxnreg; and TensorMap, a map's storage on every backend.
///
/// The device functions exist where wgmma does (HIPGRAD_GEMM_TMA: the sm_90a device pass); a
/// box copy elsewhere traps, so that operands that copy boxes still compile.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/gemm/arch/wgmma_atom.hpp"

#if defined(HIPGRAD_BACKEND_CUDA)
#include <cuda.h>
#endif

namespace hipgrad::gemm {

#if defined(HIPGRAD_BACKEND_CUDA)
/// The backend encodes tensor maps and passes them to kernels as __grid_constant__ parameters:
/// the TMA operands and the warp-specialised kernels that take them exist (their bodies run
/// only where HIPGRAD_GEMM_TMA). The layers above test this, not the backend.
#define HIPGRAD_GEMM_TENSOR_MAPS 1
/// A tensor map as the driver encodes it (128 bytes, 64-byte aligned).
using TensorMap = CUtensorMap;
#else
/// A tensor map's storage where the backend has no TMA, so that code holding maps compiles on
/// every backend: nothing encodes one.
struct alignas(64) TensorMap {
  unsigned char bytes[128];
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
/// kernel's start. A map among the kernel's parameters is no memory a kernel writes: no fence.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_acquire_map(const CUtensorMap* map) {
  if (!__isGlobal(map)) return;
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(reinterpret_cast<std::uint64_t>(map))
               : "memory");
}

/// Fetches a tensor map into the descriptor cache ahead of its first use.
HIPGRAD_DEVICE HIPGRAD_INLINE void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
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
