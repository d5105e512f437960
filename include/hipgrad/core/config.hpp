/// @file config.hpp
/// @brief Which backend compiles this translation unit, and the function-space qualifiers.
///
/// This header includes nothing from a GPU toolkit, so code that is shared between host-only
/// translation units (CPU references, host tools compiled by a plain C++ compiler) and GPU
/// translation units can use the qualifiers below.
#pragma once

#if defined(__CUDACC__)
#define HIPGRAD_BACKEND_CUDA 1  // nvcc: the HIP API subset is mapped onto CUDA (hip_on_cuda.hpp)
#elif defined(__HIP__) || defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define HIPGRAD_BACKEND_HIP 1  // hipcc / clang in HIP mode: the real HIP runtime
#endif

#if defined(HIPGRAD_BACKEND_CUDA) || (defined(HIPGRAD_BACKEND_HIP) && defined(__HIP__))
#define HIPGRAD_GPU_COMPILER 1  // kernels and __device__ code can be compiled in this unit
#endif

#if defined(HIPGRAD_GPU_COMPILER)
#define HIPGRAD_HOST_DEVICE __host__ __device__
#define HIPGRAD_DEVICE __device__
#else
#define HIPGRAD_HOST_DEVICE
#define HIPGRAD_DEVICE
#endif

// True only while compiling device code (the device pass of nvcc or of clang's HIP mode).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define HIPGRAD_DEVICE_PASS 1
#endif

#if defined(HIPGRAD_GPU_COMPILER)
#define HIPGRAD_INLINE inline __attribute__((always_inline))
#else
#define HIPGRAD_INLINE inline
#endif

// Loop unrolling hint for compilers that honour it (nvcc's device pass, clang); a plain host
// compiler would warn about an unknown pragma.
#if defined(__CUDA_ARCH__) || defined(__clang__)
#define HIPGRAD_UNROLL _Pragma("unroll")
#else
#define HIPGRAD_UNROLL
#endif

// Caps a kernel's registers per thread (`registers`) whatever its block size, up to `max_threads`:
// __maxnreg__ on NVIDIA (__launch_bounds__ would also cap the threads); AMD has no such cap and
// takes the block size bound, from which the compiler sizes the registers.
#if defined(HIPGRAD_BACKEND_CUDA)
#define HIPGRAD_MAX_REGISTERS(registers, max_threads) __maxnreg__(registers)
#else
#define HIPGRAD_MAX_REGISTERS(registers, max_threads) __launch_bounds__(max_threads)
#endif

// A kernel parameter whose address the kernel takes (a table read by index, a tensor map): on
// NVIDIA __grid_constant__, so that it is read where the launch put it instead of copied to local
// memory; AMD's kernel arguments are addressable memory already.
#if defined(HIPGRAD_BACKEND_CUDA)
#define HIPGRAD_GRID_CONSTANT __grid_constant__
#else
#define HIPGRAD_GRID_CONSTANT
#endif

namespace hipgrad {
/// The widest warp among the targets this build compiles for: NVIDIA 32, AMD 64 (CDNA; RDNA's 32
/// is narrower). Host plans that must hold for every target of the build size by it.
#if defined(HIPGRAD_BACKEND_CUDA)
inline constexpr int kWidestWarpOfBuild = 32;
#else
inline constexpr int kWidestWarpOfBuild = 64;
#endif

/// Whether this build compiles for NVIDIA (nvcc): code above core/ picks backend-specific
/// constants from this value rather than from a platform macro.
#if defined(HIPGRAD_BACKEND_CUDA)
inline constexpr bool kBackendIsCuda = true;
#else
inline constexpr bool kBackendIsCuda = false;
#endif

/// The most shared memory one block may take on the targets this build compiles for: NVIDIA
/// sm_80/sm_90 227 KB (with the kernel's opt-in), AMD gfx90a/gfx94x 64 KB of LDS. A tile
/// configuration that needs more is not selectable in the build (the GEMM launcher asserts it);
/// the device's own limit (DeviceInfo) is checked again when a call plans.
#if defined(HIPGRAD_BACKEND_CUDA)
inline constexpr int kSharedBytesOfBuildTargets = 227 * 1024;
#else
inline constexpr int kSharedBytesOfBuildTargets = 64 * 1024;
#endif
}  // namespace hipgrad
