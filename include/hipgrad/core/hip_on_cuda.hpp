/// @file hip_on_cuda.hpp
/// @brief The HIP runtime API subset that hipgrad, its examples and tests use, mapped onto CUDA.
///
/// HIP's own NVIDIA headers (HIP 5.x) do not compile against CUDA 13, so when nvcc builds hipgrad
/// this header stands in for <hip/hip_runtime.h>. Every name keeps HIP's spelling and meaning; the
/// error and enum types are CUDA's own (HIP on NVIDIA does the same translation). Device-side
/// warp intrinsics are not mapped here: CUDA 13 still declares the deprecated unsynchronised
/// shuffles and `__ballot`, so redefining HIP's names would collide. Device code uses the
/// portable wrappers of device_intrinsics.hpp instead.
#pragma once

#if !defined(__CUDACC__)
#error "hip_on_cuda.hpp is only for nvcc; on AMD include <hip/hip_runtime.h>"
#endif

#include <cuda_runtime.h>

#include <cstddef>

// ---- errors -------------------------------------------------------------------------------
using hipError_t = cudaError_t;
inline constexpr hipError_t hipSuccess = cudaSuccess;
inline constexpr hipError_t hipErrorInvalidValue = cudaErrorInvalidValue;
inline constexpr hipError_t hipErrorOutOfMemory = cudaErrorMemoryAllocation;
inline constexpr hipError_t hipErrorNoDevice = cudaErrorNoDevice;
inline constexpr hipError_t hipErrorInvalidDevice = cudaErrorInvalidDevice;
inline constexpr hipError_t hipErrorNotReady = cudaErrorNotReady;
inline constexpr hipError_t hipErrorInsufficientDriver = cudaErrorInsufficientDriver;

inline const char* hipGetErrorString(hipError_t e) { return cudaGetErrorString(e); }
inline const char* hipGetErrorName(hipError_t e) { return cudaGetErrorName(e); }
inline hipError_t hipGetLastError() { return cudaGetLastError(); }
inline hipError_t hipPeekAtLastError() { return cudaPeekAtLastError(); }

// ---- devices ------------------------------------------------------------------------------
using hipDeviceProp_t = cudaDeviceProp;
using hipDeviceAttribute_t = cudaDeviceAttr;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeMultiprocessorCount = cudaDevAttrMultiProcessorCount;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeMaxSharedMemoryPerBlock =
    cudaDevAttrMaxSharedMemoryPerBlockOptin;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeMaxSharedMemoryPerMultiprocessor =
    cudaDevAttrMaxSharedMemoryPerMultiprocessor;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeL2CacheSize = cudaDevAttrL2CacheSize;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeWarpSize = cudaDevAttrWarpSize;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMajor = cudaDevAttrComputeCapabilityMajor;
inline constexpr hipDeviceAttribute_t hipDeviceAttributeComputeCapabilityMinor = cudaDevAttrComputeCapabilityMinor;

inline hipError_t hipGetDeviceCount(int* count) { return cudaGetDeviceCount(count); }
inline hipError_t hipGetDevice(int* device) { return cudaGetDevice(device); }
inline hipError_t hipSetDevice(int device) { return cudaSetDevice(device); }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  return cudaGetDeviceProperties(prop, device);
}
inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attr, int device) {
  return cudaDeviceGetAttribute(value, attr, device);
}
inline hipError_t hipDeviceSynchronize() { return cudaDeviceSynchronize(); }
inline hipError_t hipDeviceReset() { return cudaDeviceReset(); }
inline hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return cudaMemGetInfo(free_bytes, total_bytes);
}

// ---- memory -------------------------------------------------------------------------------
using hipMemcpyKind = cudaMemcpyKind;
inline constexpr hipMemcpyKind hipMemcpyHostToHost = cudaMemcpyHostToHost;
inline constexpr hipMemcpyKind hipMemcpyHostToDevice = cudaMemcpyHostToDevice;
inline constexpr hipMemcpyKind hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost;
inline constexpr hipMemcpyKind hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice;
inline constexpr hipMemcpyKind hipMemcpyDefault = cudaMemcpyDefault;

template <typename T>
inline hipError_t hipMalloc(T** ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
inline hipError_t hipFree(void* ptr) { return cudaFree(ptr); }
template <typename T>
inline hipError_t hipHostMalloc(T** ptr, size_t bytes, unsigned int /*flags*/ = 0) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
inline hipError_t hipHostFree(void* ptr) { return cudaFreeHost(ptr); }
inline hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, hipMemcpyKind kind) {
  return cudaMemcpy(dst, src, bytes, kind);
}
inline hipError_t hipMemset(void* dst, int value, size_t bytes) { return cudaMemset(dst, value, bytes); }

// ---- streams and events -------------------------------------------------------------------
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipFuncAttribute = cudaFuncAttribute;
inline constexpr hipFuncAttribute hipFuncAttributeMaxDynamicSharedMemorySize =
    cudaFuncAttributeMaxDynamicSharedMemorySize;

inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind kind,
                                 hipStream_t stream = nullptr) {
  return cudaMemcpyAsync(dst, src, bytes, kind, stream);
}
inline hipError_t hipMemsetAsync(void* dst, int value, size_t bytes, hipStream_t stream = nullptr) {
  return cudaMemsetAsync(dst, value, bytes, stream);
}
inline hipError_t hipStreamCreate(hipStream_t* stream) { return cudaStreamCreate(stream); }
using hipStreamCaptureStatus = cudaStreamCaptureStatus;
inline constexpr hipStreamCaptureStatus hipStreamCaptureStatusNone = cudaStreamCaptureStatusNone;
inline hipError_t hipStreamIsCapturing(hipStream_t stream, hipStreamCaptureStatus* status) {
  return cudaStreamIsCapturing(stream, status);
}
using hipGraph_t = cudaGraph_t;
using hipStreamCaptureMode = cudaStreamCaptureMode;
inline constexpr hipStreamCaptureMode hipStreamCaptureModeThreadLocal = cudaStreamCaptureModeThreadLocal;
inline hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode) {
  return cudaStreamBeginCapture(stream, mode);
}
inline hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* graph) {
  return cudaStreamEndCapture(stream, graph);
}
inline hipError_t hipGraphDestroy(hipGraph_t graph) { return cudaGraphDestroy(graph); }
using hipGraphExec_t = cudaGraphExec_t;
inline hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t* exec, hipGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiateWithFlags(exec, graph, flags);
}
inline hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) { return cudaGraphLaunch(exec, stream); }
inline hipError_t hipGraphExecDestroy(hipGraphExec_t exec) { return cudaGraphExecDestroy(exec); }
inline hipError_t hipStreamDestroy(hipStream_t stream) { return cudaStreamDestroy(stream); }
inline hipError_t hipStreamSynchronize(hipStream_t stream) { return cudaStreamSynchronize(stream); }
inline hipError_t hipEventCreate(hipEvent_t* event) { return cudaEventCreate(event); }
inline hipError_t hipEventDestroy(hipEvent_t event) { return cudaEventDestroy(event); }
inline hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream = nullptr) {
  return cudaEventRecord(event, stream);
}
inline hipError_t hipEventSynchronize(hipEvent_t event) { return cudaEventSynchronize(event); }
inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
  return cudaEventElapsedTime(ms, start, stop);
}
template <typename Kernel>
inline hipError_t hipFuncSetAttribute(Kernel* kernel, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
using hipFuncAttributes = cudaFuncAttributes;
inline hipError_t hipFuncGetAttributes(hipFuncAttributes* attributes, const void* kernel) {
  return cudaFuncGetAttributes(attributes, kernel);
}
template <typename Kernel>
inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel kernel, int block_size,
                                                               size_t dynamic_shared_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, block_size, dynamic_shared_bytes);
}

// ---- kernel launch ------------------------------------------------------------------------
/// HIP's launch macro; hipgrad itself uses the triple-chevron syntax, which both compilers accept.
#define hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__)

// HIP's legacy index spellings.
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
