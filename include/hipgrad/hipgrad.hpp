/// @file hipgrad.hpp
/// @brief The whole library: platform layer, primitives and ops. (The host tools under
///        hipgrad/host/ are for examples and tests and are included separately.)
#pragma once

#include "hipgrad/core/array.hpp"
#include "hipgrad/core/config.hpp"
#include "hipgrad/core/device_intrinsics.hpp"
#include "hipgrad/core/hip_check.hpp"
#include "hipgrad/core/hip_runtime.hpp"
#include "hipgrad/core/numeric_types.hpp"
#include "hipgrad/core/status.hpp"
#include "hipgrad/core/strides.hpp"
#include "hipgrad/core/vector_access.hpp"
#include "hipgrad/primitives/block_reduce.hpp"
#include "hipgrad/primitives/reduce_ops.hpp"
#include "hipgrad/primitives/warp_reduce.hpp"
#include "hipgrad/primitives/welford.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/ops/groupnorm/activation.hpp"
#include "hipgrad/ops/groupnorm/backward.hpp"
#include "hipgrad/ops/groupnorm/backward_data.hpp"
#include "hipgrad/ops/groupnorm/backward_gamma_beta.hpp"
#include "hipgrad/ops/groupnorm/forward.hpp"
#include "hipgrad/ops/groupnorm/problem.hpp"
