# Chooses the GPU backend and makes its compiler and libraries available.
#
#   HIPGRAD_BACKEND   AUTO (default), CUDA or HIP
#     CUDA: nvcc through CMake's CUDA language; CMAKE_CUDA_ARCHITECTURES defaults to 90a (sm_90 with
#           its architecture-specific instructions, which the GEMM's wgmma mainloop needs).
#           CUB ships with the CUDA toolkit.
#     HIP:  hipcc as the C++ compiler (-DCMAKE_CXX_COMPILER=hipcc), find_package(hip) and
#           find_package(rocprim); GPU_TARGETS defaults to gfx90a;gfx940.
#     AUTO: HIP when the C++ compiler is hipcc, otherwise CUDA when nvcc is found.
#
# Defines hipgrad_link_backend(<target>) that adds the backend's libraries to an INTERFACE target.
# Used by hipgrad's own build and by the installed package config alike.
include_guard(GLOBAL)

set(HIPGRAD_BACKEND "AUTO" CACHE STRING "GPU backend: AUTO, CUDA or HIP")
set_property(CACHE HIPGRAD_BACKEND PROPERTY STRINGS AUTO CUDA HIP)

if(HIPGRAD_BACKEND STREQUAL "AUTO")
  if(CMAKE_CXX_COMPILER MATCHES "hipcc")
    set(HIPGRAD_BACKEND "HIP")
  else()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(HIPGRAD_BACKEND "CUDA")
    else()
      message(FATAL_ERROR
        "hipgrad: no GPU compiler found. Put nvcc on PATH (NVIDIA) or configure with "
        "-DCMAKE_CXX_COMPILER=hipcc (AMD), or set HIPGRAD_BACKEND.")
    endif()
  endif()
endif()

if(HIPGRAD_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a)
  endif()
  enable_language(CUDA)
  if(NOT DEFINED CMAKE_CUDA_STANDARD)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  endif()
elseif(HIPGRAD_BACKEND STREQUAL "HIP")
  if(NOT GPU_TARGETS)
    set(GPU_TARGETS "gfx90a;gfx940" CACHE STRING "AMD GPU targets to compile for" FORCE)
  endif()
  find_package(hip REQUIRED CONFIG)
  find_package(rocprim REQUIRED CONFIG)
else()
  message(FATAL_ERROR "hipgrad: HIPGRAD_BACKEND must be AUTO, CUDA or HIP, not '${HIPGRAD_BACKEND}'")
endif()
message(STATUS "hipgrad backend: ${HIPGRAD_BACKEND}")

function(hipgrad_link_backend target)
  if(HIPGRAD_BACKEND STREQUAL "HIP")
    target_link_libraries(${target} INTERFACE hip::device roc::rocprim)
  else()
    target_compile_features(${target} INTERFACE cuda_std_17)
  endif()
endfunction()
