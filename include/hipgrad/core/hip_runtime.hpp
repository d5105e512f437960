/// @file hip_runtime.hpp
/// @brief The HIP runtime for this backend: the real one on AMD, the CUDA mapping under nvcc.
#pragma once

#include "hipgrad/core/config.hpp"

#if defined(HIPGRAD_BACKEND_CUDA)
#include "hipgrad/core/hip_on_cuda.hpp"
#elif defined(HIPGRAD_BACKEND_HIP)
#include <hip/hip_runtime.h>
#else
#error "hipgrad GPU headers need nvcc or hipcc; host-only headers (host/reference, core/status.hpp) need neither"
#endif
