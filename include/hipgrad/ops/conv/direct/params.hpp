/// @file params.hpp
/// @brief The direct convolution kernels' parameters, one struct per kernel, filled by the host
///        plan (plan.hpp) and read by the device code (backward_data_kernel.hpp,
///        backward_weight_kernel.hpp).
///
/// Both directions walk one spatial dimension's stride s and dilation d the same way. With
/// g = gcd(s, d), the taps that meet one dx position lie tap_step = s / g apart, and consecutive
/// taps reach dy positions lattice = d / g apart; dx positions phase_step = s·d / g apart meet the
/// same taps. A thread that owns dx positions x + j·phase_step (backward-data), or dy positions
/// o + j·lattice (backward-weight), therefore reads its operand at unit steps of one window index
/// (j − i, or j + i, over tap i): a register window reused across taps, with no inserted zero
/// multiplied.
#pragma once

#include <cstdint>

#include "hipgrad/core/config.hpp"
#include "hipgrad/core/integer_math.hpp"

namespace hipgrad::conv::direct {

/// Tap counts a thread's W window is compiled for; more taps run in chunks of the largest.
inline constexpr int kMaxWindowTaps = 7;

/// Threads of a direct block (at most; a plan may use fewer).
inline constexpr int kMaxBlockThreads = 256;

/// Blocks of kMaxBlockThreads a multiprocessor keeps resident: the compiler fits the kernels'
/// registers to it (128 each on NVIDIA), so that enough loads are in flight.
inline constexpr int kMinBlocks = 2;

/// Positions a thread owns along W (backward-data: dx outputs; backward-weight: dy positions); a
/// multiple of every 16-byte vector (fp16's 8), so that a run stores whole vectors.
inline constexpr int kRun = 8;

/// One spatial dimension as the kernels walk it (see the file comment).
struct DimWalk {
  int in = 1;   ///< x / dx length
  int out = 1;  ///< y / dy length
  int filter = 1;
  int stride = 1;
  int dilation = 1;
  int pad = 0;  ///< left pad
  int tap_step = 1;
  int lattice = 1;
  int phase_step = 1;
  int tile = 1;    ///< a block's tile: dx positions (backward-data) or dy positions (backward-weight)
  int tiles = 1;   ///< tiles along the dimension
  int window = 1;  ///< shared-memory window length: dy (backward-data) or x (backward-weight)
  int align = 1;   ///< windows start at multiples of it (W filled fastest: the fill's vector)
};

/// A tensor's strides in elements, logical order [G, N, C or K, spatial...].
template <int NDim>
struct TensorStrides {
  std::int64_t g = 0, n = 0, c = 0;
  std::int64_t spatial[NDim] = {};
};

/// A box of an activation tensor copied into shared memory as fp32: `lanes` channels (the block's
/// groups × channels per group, lane = group·per_group + channel) at every position of the window,
/// [lanes][positions] (row-major positions), so that a thread's window along W is a run of one
/// row; positions outside the tensor read as zero.
struct WindowLanes {
  int lanes = 1;
  int per_group = 1;          ///< channels per group in the box
  int pitch = 1;              ///< shared-memory floats between lanes: the positions, odd (no bank conflicts)
  bool lanes_fastest = true;  ///< the fill walks lanes fastest (else W fastest)
};

/// conv::BackwardData's direct kernel: dx = Σ_k Σ_taps dy · w, a block per (n, group tile,
/// position tile); threads own (lane = dx channel, W run of kRun positions phase_step apart,
/// rows of the outer dimensions).
template <typename T, int NDim>
struct DataKernelParams {
  const T* dy = nullptr;
  const T* w = nullptr;
  T* dx = nullptr;
  TensorStrides<NDim> dy_strides, dx_strides;
  std::int64_t w_g = 0, w_k = 0, w_c = 0, w_spatial[NDim] = {};
  int groups = 1, batch = 1, k = 1, c = 1;
  DimWalk dims[NDim];
  int group_tile = 1;  ///< groups a block owns
  int group_tiles = 1;
  int k_chunk = 1;    ///< dy channels per group staged at once
  int lanes = 1;      ///< dx lanes: group_tile · c
  int runs = 1;       ///< W runs per phase class in a tile
  int w_slots = 1;    ///< phase_step · runs
  int row_slots = 1;  ///< thread rows over the outer dimensions
  int rows_per_thread = 1;
  int taps = 1;        ///< filter taps (product)
  WindowLanes dy_box;  ///< lanes: group_tile · k_chunk
  int dy_lead = 0;     ///< floats before the dy window: slots below the first a thread reads
  int w_pitch = 1;     ///< floats between lanes of the staged taps ([lane][k][tap], odd)
  int threads = 1;
};

/// conv::BackwardWeight's direct kernel: each block adds dy · x over a slice of position tiles into
/// fp32 partial sums of its (group tile, k tile) lanes × its taps; threads own (lane = (group, k,
/// c), a combination of one outer tap and one W tap group, a dy W residue, a run). The
/// combinations a lane has are spread over combo_blocks blocks where they do not fit one.
template <typename T, int NDim>
struct WeightKernelParams {
  const T* x = nullptr;
  const T* dy = nullptr;
  float* partials = nullptr;  ///< [slices][G][K][C][taps]
  TensorStrides<NDim> x_strides, dy_strides;
  int groups = 1, batch = 1, k = 1, c = 1;
  DimWalk dims[NDim];
  int group_tile = 1, group_tiles = 1;
  int k_tile = 1, k_tiles = 1;
  int lanes = 1;       ///< group_tile · k_tile · c
  int outer_taps = 1;  ///< taps of the outer dimensions (product)
  int tap_groups = 1;  ///< W tap classes × chunks of the kernel's window taps
  int combos = 1;      ///< outer_taps · tap_groups
  int combos_per_block = 1, combo_blocks = 1;
  int runs = 1;
  int slots = 1;  ///< combos_per_block · lattice residues · runs
  int taps = 1;
  std::int64_t position_tiles = 1;  ///< N · Π tiles
  std::int64_t tiles_per_slice = 1;
  int slices = 1;
  WindowLanes dy_box, x_box;
  int threads = 1;
};

/// Adjacent groups a thread of the vector kernels owns: one load of 16 (fp32) or 8 (16-bit) bytes,
/// few enough registers that a register window of kRun + 6 positions fits beside the sums.
inline constexpr int kLaneVector = 4;

/// Blocks of kMaxBlockThreads the vector kernels keep resident on a multiprocessor: they wait on
/// global loads, and more warps in flight hide more of that latency (at most 80 registers a thread).
inline constexpr int kVectorMinBlocks = 3;

/// conv::BackwardData's vector kernel, for depthwise problems (C = K = 1) whose groups lie
/// adjacent in memory (channels-last): a thread owns kLaneVector groups × kRun dx positions of one
/// phase along W (phase_step apart) in one row, and reads dy straight from global memory through
/// a register window (the caches keep the halo, read once from DRAM); the block's taps are staged
/// in shared memory as fp32, [tap][lane]. A block is (a tile of lane vectors) × (slots of W runs);
/// grid x walks the runs, grid y the lane tiles.
template <typename T, int NDim>
struct VectorDataParams {
  const T* dy = nullptr;
  const T* w = nullptr;
  T* dx = nullptr;
  TensorStrides<NDim> dy_strides, dx_strides;
  std::int64_t w_g = 0, w_spatial[NDim] = {};
  int groups = 1, batch = 1;
  DimWalk dims[NDim];
  int taps = 1;
  int block_vectors = 1;  ///< lane vectors of a block (the threads' fastest index)
  int slots = 1;          ///< W runs of a block
  int threads = 1;
  int w_runs = 1;         ///< W runs of a dx row: phase_step · ⌈⌈W / phase_step⌉ / kRun⌉
  std::int64_t runs = 1;  ///< N · Π outer dx lengths · w_runs (below 2^31)
  /// A run's index in mixed radix: [NDim − 1] divides by w_runs, [d] by dim d's dx length.
  FastDivmod run_digits[NDim];
};

/// conv::BackwardWeight's vector kernel, for the same problems: a thread owns kLaneVector groups,
/// one combination of outer taps and W tap group (as WeightKernelParams), and sums over the runs of
/// its slice (kRun dy positions lattice apart, one row each) with dy and an x register window read
/// from global memory. The block adds its slots' sums in order into the slice's partials
/// [slices][G][taps]; grid x walks the slices, grid y the (lane tile, combination block) pairs.
template <typename T, int NDim>
struct VectorWeightParams {
  const T* x = nullptr;
  const T* dy = nullptr;
  float* partials = nullptr;
  TensorStrides<NDim> x_strides, dy_strides;
  int groups = 1, batch = 1;
  DimWalk dims[NDim];
  int taps = 1;
  int outer_taps = 1, tap_groups = 1, combos = 1;
  int block_vectors = 1, combos_per_block = 1, combo_blocks = 1;
  int slots = 1;  ///< run slots per (lane vector, combination)
  int threads = 1;
  int w_runs = 1;         ///< W runs of a dy row: lattice · ⌈⌈W_out / lattice⌉ / kRun⌉
  std::int64_t runs = 1;  ///< N · Π outer dy lengths · w_runs (below 2^31)
  /// A run's index in mixed radix: [NDim − 1] divides by w_runs, [d] by dim d's dy length.
  FastDivmod run_digits[NDim];
  std::int64_t runs_per_slice = 1;
  int slices = 1;
};

/// The fixed-order reduction of the weight kernel's slices into dw.
template <typename T, int NDim>
struct WeightReduceParams {
  const float* partials = nullptr;
  T* dw = nullptr;
  int slices = 1;
  int groups = 1, k = 1, c = 1;
  int filter[NDim] = {};
  std::int64_t w_g = 0, w_k = 0, w_c = 0, w_spatial[NDim] = {};
};

}  // namespace hipgrad::conv::direct
