/// @file test_conv_direct.cpp
/// @brief The direct kernels of both conv ops (Algorithm::kDirect, and kAuto where it takes them).
///        CPU-only: over listed and seeded random problems, every dx element of a backward-data
///        plan belongs to exactly one thread, which meets the same taps at all its positions and
///        reads them inside its dy window; every dw partial of a backward-weight plan is written
///        once per slice, every dy position of a tile summed once per tap, every x read inside the
///        window; kAuto's choice. GPU, against the CPU reference: depthwise with channel
///        multipliers, 2–32 channels per group, 1-D/2-D/3-D, strides 1–4, dilations 1–3,
///        asymmetric pads, filters of more W taps than a window holds (chunks), NHWGC, GNHWC,
///        NGCHW and padded strides, fp32/fp16/bf16; integer data compared exactly, decimal data
///        within the tolerance of fp32 sums; outputs NaN-poisoned first; seeded random problems;
///        backward-weight over several slices (the op's and split_k's), bitwise repeatable.

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "conv/conv_direct_emulator.hpp"
#include "conv/conv_test_problems.hpp"
#include "conv/conv_test_runs.hpp"
#include "conv_instances.hpp"
#include "hipgrad/ops/conv/direct/launch.hpp"

namespace {

using hipgrad::Index;
using hipgrad::Status;
using hipgrad::conv::Algorithm;
using hipgrad::conv::ConvLayout;
using hipgrad::conv::ConvParams;
using hipgrad::conv::Problem;
using hipgrad::host::InitMethod;
using hipgrad::test::conv_params;
namespace direct = hipgrad::conv::direct;

std::vector<ConvParams<1>> direct_problems_1d() {
  return {
      conv_params<1>(16, 2, 1, 1, {3}, {37}, {1}, {1}, {1}, {1}),  // depthwise
      conv_params<1>(12, 2, 2, 1, {5}, {29}, {2}, {1}, {2}, {1}),  // multiplier 2, stride 2
      conv_params<1>(5, 1, 1, 1, {9}, {40}, {1}, {2}, {4}, {8}),   // 9 taps: two window chunks, dilation 2
      conv_params<1>(3, 2, 2, 3, {11}, {61}, {3}, {2}, {5}, {3}),  // phase step 6, 11 taps
      conv_params<1>(6, 2, 4, 4, {3}, {23}, {2}, {1}, {1}, {1}),   // 4 channels per group
      conv_params<1>(40, 1, 1, 1, {4}, {8}, {4}, {1}, {0}, {0}),   // stride 4 patches, two group tiles
      conv_params<1>(4, 1, 1, 1, {3}, {300}, {1}, {1}, {1}, {1}),  // several tiles along W
  };
}

std::vector<ConvParams<2>> direct_problems_2d() {
  return {
      conv_params<2>(40, 2, 1, 1, {3, 3}, {9, 11}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),   // depthwise 3×3
      conv_params<2>(24, 2, 1, 1, {3, 3}, {13, 11}, {2, 2}, {1, 1}, {1, 1}, {1, 1}),  // stride 2, odd sizes
      conv_params<2>(8, 1, 1, 1, {7, 7}, {10, 9}, {1, 1}, {1, 1}, {3, 3}, {3, 3}),    // ConvNeXt 7×7
      conv_params<2>(7, 2, 3, 1, {5, 5}, {12, 11}, {2, 2}, {1, 1}, {2, 2}, {2, 1}),   // multiplier 3, 5×5 s2
      conv_params<2>(5, 2, 8, 4, {3, 3}, {8, 9}, {1, 1}, {2, 2}, {2, 0}, {1, 3}),     // grouped, dilation 2
      conv_params<2>(3, 1, 5, 3, {3, 2}, {9, 8}, {2, 1}, {1, 2}, {1, 0}, {2, 1}),     // odd channels, mixed
      conv_params<2>(4, 1, 2, 1, {4, 4}, {12, 8}, {4, 4}, {1, 1}, {0, 0}, {0, 0}),    // 4×4 s4 patchify
      conv_params<2>(12, 2, 3, 2, {1, 1}, {5, 6}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),    // 1×1
      conv_params<2>(2, 1, 32, 32, {3, 3}, {6, 7}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),   // 32 channels per group
      conv_params<2>(3, 2, 9, 17, {3, 3}, {7, 5}, {1, 2}, {1, 1}, {1, 1}, {1, 1}),    // 17 in, 9 out
      conv_params<2>(6, 1, 1, 1, {3, 3}, {30, 40}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),   // several tiles each way
  };
}

std::vector<ConvParams<3>> direct_problems_3d() {
  return {
      conv_params<3>(10, 1, 1, 1, {3, 3, 3}, {5, 6, 7}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}),
      conv_params<3>(4, 2, 2, 2, {1, 3, 3}, {3, 9, 8}, {1, 2, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 1}),
      conv_params<3>(3, 1, 2, 1, {3, 3, 3}, {7, 8, 6}, {2, 2, 1}, {1, 2, 1}, {1, 2, 0}, {1, 0, 2}),
      conv_params<3>(4, 1, 1, 1, {3, 3, 3}, {9, 12, 20}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}),  // tiles
  };
}

/// A seeded random problem of few channels per group for the direct kernels.
template <int NDim>
hipgrad::test::RandomCase<NDim> random_direct_case(std::mt19937_64& rng) {
  hipgrad::test::RandomCase<NDim> r = hipgrad::test::random_case<NDim>(rng);
  auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  r.params.G = pick(1, 40);
  r.params.C = pick(0, 2) == 0 ? pick(2, 9) : 1;
  r.params.K = pick(0, 2) == 0 ? pick(1, 9) : r.params.C;
  return r;
}

/// Channels-last with room for 3 more groups at each position: groups adjacent, rows neither packed
/// nor aligned to a lane vector.
template <int NDim>
Problem<NDim> spaced_channels_last(const ConvParams<NDim>& p) {
  Problem<NDim> problem = Problem<NDim>::packed(p);
  std::vector<Index> in = p.input_lengths(), out = p.output_lengths();
  in[0] += 3, out[0] += 3;
  const std::vector<int> order = hipgrad::conv::activation_order<NDim>(ConvLayout::kNHWGC);
  problem.input_strides = hipgrad::host::strides_for_order(in, order);
  problem.output_strides = hipgrad::host::strides_for_order(out, order);
  return problem;
}

/// The plan of every direct test problem (fp16's: the plans do not depend on the type but for
/// the bytes that choose backward-weight's slices).
template <int NDim>
std::vector<Problem<NDim>> plan_problems(const std::vector<ConvParams<NDim>>& list, std::uint64_t seed) {
  std::vector<Problem<NDim>> problems;
  for (const ConvParams<NDim>& p : list) {
    for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kNGCHW})
      problems.push_back(Problem<NDim>::packed(p, layout));
    problems.push_back(spaced_channels_last(p));
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 60; ++i) problems.push_back(hipgrad::test::problem_of(random_direct_case<NDim>(rng)));
  return problems;
}

/// Every dx element owned by one thread of a vector plan, whose positions share their taps.
template <int NDim>
void expect_vector_data_plan_covers(const direct::VectorDataPlan<hipgrad::half, NDim>& plan,
                                    const Problem<NDim>& problem) {
  const direct::VectorDataParams<hipgrad::half, NDim>& k = plan.params;
  ASSERT_LE(k.threads, direct::kMaxBlockThreads);
  ASSERT_LE(plan.shared_bytes, direct::kSharedBudget);
  hipgrad::host::Tensor<float> index_of(problem.params.input_lengths());
  std::vector<int> owners(index_of.storage().size());
  for (int by = 0; by < plan.grid_y; ++by) {
    for (int bx = 0; bx < static_cast<int>(plan.grid_x); ++bx) {
      for (int tid = 0; tid < k.threads; ++tid) {
        const direct::VectorDataThread t = direct::vector_data_thread(k, bx, by, tid);
        if (!t.works) continue;
        const direct::Phase first = direct::phase_of(k.dims[NDim - 1], t.x[NDim - 1]);
        for (int j = 0; j < direct::kRun; ++j) {
          const int xw = t.x[NDim - 1] + j * k.dims[NDim - 1].phase_step;
          if (xw >= k.dims[NDim - 1].in) continue;
          const direct::Phase ph = direct::phase_of(k.dims[NDim - 1], xw);
          ASSERT_EQ(ph.first_tap, first.first_tap) << "x " << xw;
          if (ph.taps > 0) ASSERT_EQ(ph.base, first.base + j * k.dims[NDim - 1].lattice) << "x " << xw;
          for (int e = 0; e < direct::kLaneVector && t.g0 + e < k.groups; ++e) {
            std::vector<Index> at = {t.g0 + e, t.n, 0};
            for (int d = 0; d < NDim - 1; ++d) at.push_back(t.x[d]);
            at.push_back(xw);
            ++owners[static_cast<std::size_t>(index_of.offset(at))];
          }
        }
      }
    }
  }
  for (std::size_t e = 0; e < owners.size(); ++e) ASSERT_EQ(owners[e], 1) << "dx element " << e;
}

/// Every dx element owned by one thread of the plan; the thread's positions share their taps,
/// whose dy positions lie in the block's window.
template <int NDim>
void expect_data_plan_covers(const Problem<NDim>& problem, direct::Kernels kernels) {
  const direct::DataPlan<hipgrad::half, NDim> plan = direct::make_data_plan<hipgrad::half, NDim>(problem, kernels);
  ASSERT_TRUE(plan.status.is_ok()) << plan.status.to_string();
  if (plan.vectors) return expect_vector_data_plan_covers(plan.vector, problem);
  const direct::DataKernelParams<hipgrad::half, NDim>& k = plan.params;
  ASSERT_LE(k.threads, direct::kMaxBlockThreads);
  ASSERT_LE(plan.shared_bytes, direct::kSharedBudget);
  const ConvParams<NDim>& p = problem.params;
  hipgrad::host::Tensor<float> index_of(p.input_lengths());
  std::vector<int> owners(index_of.storage().size());
  for (int b = 0; b < static_cast<int>(plan.blocks); ++b) {
    const direct::DataBlock<NDim> blk = direct::data_block(k, b);
    for (int tid = 0; tid < k.threads; ++tid) {
      const direct::DataThread th = direct::data_thread(k, blk, tid);
      if (th.row_slot >= k.row_slots || blk.g0 + th.group >= k.groups) continue;
      const direct::Phase first = direct::phase_of(k.dims[NDim - 1], th.x_first);
      for (int r = 0; r < k.rows_per_thread; ++r) {
        int x[NDim];
        if (!direct::outer_row<NDim>(k.dims, blk.tile_start, th.row_slot + r * k.row_slots, true, x)) continue;
        for (int j = 0; j < direct::kRun; ++j) {
          x[NDim - 1] = th.x_first + j * k.dims[NDim - 1].phase_step;
          if (x[NDim - 1] >= k.dims[NDim - 1].in) continue;
          std::vector<Index> at = {blk.g0 + th.group, blk.n, th.channel};
          for (int d = 0; d < NDim; ++d) at.push_back(x[d]);
          ++owners[static_cast<std::size_t>(index_of.offset(at))];
          for (int d = 0; d < NDim; ++d) {
            const direct::Phase ph = direct::phase_of(k.dims[d], x[d]);
            if (d == NDim - 1) {
              ASSERT_EQ(ph.first_tap, first.first_tap) << "x " << x[d];
              if (ph.taps > 0) ASSERT_EQ(ph.base, first.base + j * k.dims[d].lattice) << "x " << x[d];
            }
            for (int i = 0; i < ph.taps; ++i) {
              // Inside the window, or past dy's end (read as zero).
              const int o = ph.base - i * k.dims[d].lattice;
              ASSERT_TRUE(o >= blk.origin[d] && (o < blk.origin[d] + k.dims[d].window || o >= k.dims[d].out))
                  << "dimension " << d << " x " << x[d] << " tap " << i;
            }
          }
        }
      }
    }
  }
  for (std::size_t e = 0; e < owners.size(); ++e) ASSERT_EQ(owners[e], 1) << "dx element " << e;
}

/// Every (g, k, c, tap) partial written once per slice; the tap groups cover the W taps once;
/// each thread's dy positions and x reads inside its tile and window.
template <int NDim, int kTaps>
void expect_weight_plan_covers(const direct::WeightPlan<hipgrad::half, NDim>& plan) {
  const direct::WeightKernelParams<hipgrad::half, NDim>& k = plan.params;
  const direct::DimWalk& w = k.dims[NDim - 1];
  std::vector<int> taps_met(static_cast<std::size_t>(w.filter), 0);
  for (int tg = 0; tg < k.tap_groups; ++tg) {
    const direct::TapGroup t = direct::tap_group_of<kTaps>(w, tg);
    for (int i = 0; i < t.count; ++i) ++taps_met[static_cast<std::size_t>(t.tap_class + (t.first + i) * w.tap_step)];
  }
  for (int m : taps_met) ASSERT_EQ(m, 1);
  const long long per_slice = static_cast<long long>(k.groups) * k.k * k.c * k.taps;
  std::vector<int> written(static_cast<std::size_t>(per_slice * k.slices), 0);
  for (int b = 0; b < static_cast<int>(plan.blocks); ++b) {
    const direct::WeightBlock blk = direct::weight_block(k, b);
    for (int e = 0; e < k.lanes * k.combos_per_block * kTaps; ++e) {
      direct::WeightOutput o;
      if (!direct::weight_output<hipgrad::half, NDim, kTaps>(k, blk, e, &o)) continue;
      const long long element = ((static_cast<long long>(o.g) * k.k + o.k) * k.c + o.c) * k.taps + o.tap;
      ++written[static_cast<std::size_t>(blk.slice * per_slice + element)];
    }
  }
  for (std::size_t e = 0; e < written.size(); ++e) ASSERT_EQ(written[e], 1) << "partial " << e;
  std::vector<int> dy_met(static_cast<std::size_t>(w.tile), 0);
  for (int slot = 0; slot < w.lattice * k.runs; ++slot) {  // the slots of one (outer tap, tap group)
    const direct::WeightRole role = direct::weight_role(k, 0, slot, 0);
    const direct::WeightWalk walk = direct::weight_walk<kTaps>(w, role, direct::tap_group_of<kTaps>(w, 0));
    for (int j = 0; j < direct::kRun; ++j) ++dy_met[static_cast<std::size_t>(walk.dy_first + j * w.lattice)];
  }
  for (int m : dy_met) ASSERT_EQ(m, 1);
  for (int slot = 0; slot < k.slots; ++slot) {
    const direct::WeightRole role = direct::weight_role(k, 0, slot, 0);
    const direct::TapGroup t = direct::tap_group_of<kTaps>(w, role.tap_group);
    if (t.count <= 0) continue;
    const direct::WeightWalk walk = direct::weight_walk<kTaps>(w, role, t);
    // The window starts up to align − 1 positions before the tile's first tap.
    ASSERT_LT(w.align - 1 + walk.x_first + (direct::kRun - 1 + t.count - 1) * walk.x_step, w.window) << "slot " << slot;
  }
  for (int d = 0; d < NDim - 1; ++d)
    ASSERT_LE((k.dims[d].tile - 1) * k.dims[d].stride + (k.dims[d].filter - 1) * k.dims[d].dilation,
              k.dims[d].window - 1);
}

/// Every (g, tap) partial of a vector plan written once per slice; the slots of a slice visit each
/// of its runs once.
template <int NDim, int kTaps>
void expect_vector_weight_plan_covers(const direct::VectorWeightPlan<hipgrad::half, NDim>& plan) {
  const direct::VectorWeightParams<hipgrad::half, NDim>& k = plan.params;
  const long long per_slice = static_cast<long long>(k.groups) * k.taps;
  std::vector<int> written(static_cast<std::size_t>(per_slice * k.slices), 0);
  for (int by = 0; by < plan.grid_y; ++by) {
    for (int bx = 0; bx < plan.grid_x; ++bx) {
      for (int e = 0; e < k.combos_per_block * k.block_vectors * kTaps * direct::kLaneVector; ++e) {
        direct::VectorPartial o;
        if (direct::vector_partial<hipgrad::half, NDim, kTaps>(k, bx, by, e, &o))
          ++written[static_cast<std::size_t>(bx * per_slice + o.g * k.taps + o.tap)];
      }
    }
  }
  for (std::size_t e = 0; e < written.size(); ++e) ASSERT_EQ(written[e], 1) << "partial " << e;
  std::vector<int> visited(static_cast<std::size_t>(k.runs), 0);
  for (int bx = 0; bx < plan.grid_x; ++bx) {
    for (int slot = 0; slot < k.slots; ++slot) {
      const int tid = slot * k.combos_per_block * k.block_vectors;
      const direct::VectorWeightThread t = direct::vector_weight_thread<hipgrad::half, NDim, kTaps>(k, bx, 0, tid);
      for (long long run = t.first_run + t.slot; run < t.end_run; run += k.slots)
        ++visited[static_cast<std::size_t>(run)];
    }
  }
  for (std::size_t r = 0; r < visited.size(); ++r) ASSERT_EQ(visited[r], 1) << "run " << r;
}

template <int NDim>
void expect_weight_plan_covers(const Problem<NDim>& problem, const hipgrad::DeviceInfo& device,
                               direct::Kernels kernels) {
  const direct::WeightPlan<hipgrad::half, NDim> plan =
      direct::make_weight_plan<hipgrad::half, NDim>(problem, device, kernels);
  ASSERT_TRUE(plan.status.is_ok()) << plan.status.to_string();
  if (plan.vectors) {
    ASSERT_LE(plan.vector.params.threads, direct::kMaxBlockThreads);
    ASSERT_LE(plan.vector.shared_bytes, direct::kSharedBudget);
    const Status s = direct::with_vector_taps(plan.vector.window_taps, [&](auto taps) {
      expect_vector_weight_plan_covers<NDim, decltype(taps)::value>(plan.vector);
      return Status::ok();
    });
    ASSERT_TRUE(s.is_ok());
    return;
  }
  ASSERT_LE(plan.params.threads, direct::kMaxBlockThreads);
  ASSERT_LE(plan.shared_bytes, direct::kSharedBudget);
  const Status s = direct::with_window_taps(plan.window_taps, [&](auto taps) {
    expect_weight_plan_covers<NDim, decltype(taps)::value>(plan);
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok());
}

/// A device of 132 multiprocessors with 228 KB of shared memory each (an H100's or H200's), so
/// that the plans take several slices without a GPU.
hipgrad::DeviceInfo hopper_like() {
  hipgrad::DeviceInfo d;
  d.known = true;
  d.multiprocessors = 132;
  d.shared_per_multiprocessor = 228 * 1024;
  return d;
}

/// Every kernel choice a plan takes: the window kernels, the vector kernels over adjacent groups,
/// and those with the vector kernels over W runs (NCHW).
constexpr direct::Kernels kEveryKernels[] = {direct::Kernels::kWindow, direct::Kernels::kVectorsWhereTheyApply,
                                             direct::Kernels::kVectorsAndWRuns};

TEST(ConvDirectPlan, EveryOutputOwnedOnceAndEveryReadInsideItsWindow) {
  for (direct::Kernels kernels : kEveryKernels) {
    for (const Problem<1>& problem : plan_problems<1>(direct_problems_1d(), 1)) {
      SCOPED_TRACE(problem.to_string());
      expect_data_plan_covers<1>(problem, kernels);
      expect_weight_plan_covers<1>(problem, hopper_like(), kernels);
      if (::testing::Test::HasFailure()) return;
    }
    for (const Problem<2>& problem : plan_problems<2>(direct_problems_2d(), 2)) {
      SCOPED_TRACE(problem.to_string());
      expect_data_plan_covers<2>(problem, kernels);
      expect_weight_plan_covers<2>(problem, hopper_like(), kernels);
      if (::testing::Test::HasFailure()) return;
    }
    for (const Problem<3>& problem : plan_problems<3>(direct_problems_3d(), 3)) {
      SCOPED_TRACE(problem.to_string());
      expect_data_plan_covers<3>(problem, kernels);
      expect_weight_plan_covers<3>(problem, hopper_like(), kernels);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

/// The kernels' code run on the host (conv_direct_emulator.hpp) against the reference: integer
/// data, compared exactly; every output element written (poisoned first).
template <typename T, int NDim>
void expect_emulation_matches(const Problem<NDim>& problem, std::uint64_t seed, direct::Kernels kernels) {
  const ConvParams<NDim>& p = problem.params;
  using hipgrad::host::Tensor;
  Tensor<T> dy(p.output_lengths(), problem.output_strides), w(p.weight_lengths(), problem.weight_strides);
  Tensor<T> x(p.input_lengths(), problem.input_strides);
  hipgrad::host::fill(dy, InitMethod::kIntegers, seed);
  hipgrad::host::fill(w, InitMethod::kIntegers, seed + 1);
  hipgrad::host::fill(x, InitMethod::kIntegers, seed + 2);
  Tensor<double> dx_expected(p.input_lengths()), dw_expected(p.weight_lengths());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_data(dy, w, dx_expected, p).is_ok());
  ASSERT_TRUE(hipgrad::host::reference::conv_backward_weight(x, dy, dw_expected, p).is_ok());
  Tensor<T> dx(p.input_lengths(), problem.input_strides), dw(p.weight_lengths(), problem.weight_strides);
  for (T& v : dx.storage()) v = hipgrad::test::poison_nan<T>();
  for (T& v : dw.storage()) v = hipgrad::test::poison_nan<T>();
  const auto data_plan = direct::make_data_plan<T, NDim>(problem, kernels);
  ASSERT_TRUE(data_plan.status.is_ok()) << data_plan.status.to_string();
  hipgrad::test::emulate_backward_data(data_plan, dy.storage().data(), w.storage().data(), dx.storage().data());
  hipgrad::test::expect_conv_output(dx, dx_expected, InitMethod::kIntegers, 1, false,
                                    "emulated " + direct::data_plan_name(data_plan));
  const auto weight_plan = direct::make_weight_plan<T, NDim>(problem, hopper_like(), kernels);
  ASSERT_TRUE(weight_plan.status.is_ok()) << weight_plan.status.to_string();
  hipgrad::test::emulate_backward_weight(weight_plan, x.storage().data(), dy.storage().data(), dw.storage().data());
  hipgrad::test::expect_conv_output(dw, dw_expected, InitMethod::kIntegers, 1, false,
                                    "emulated " + direct::weight_plan_name(weight_plan));
}

TEST(ConvDirectEmulated, ListedAndRandomProblemsMatchTheReference) {
  std::uint64_t seed = 40;
  for (direct::Kernels kernels : kEveryKernels) {
    for (const Problem<1>& problem : plan_problems<1>(direct_problems_1d(), 11)) {
      SCOPED_TRACE(problem.to_string());
      expect_emulation_matches<float, 1>(problem, seed += 3, kernels);
      if (HasFailure()) return;
    }
    for (const Problem<2>& problem : plan_problems<2>(direct_problems_2d(), 12)) {
      SCOPED_TRACE(problem.to_string());
      expect_emulation_matches<hipgrad::half, 2>(problem, seed += 3, kernels);
      if (HasFailure()) return;
    }
    for (const Problem<3>& problem : plan_problems<3>(direct_problems_3d(), 13)) {
      SCOPED_TRACE(problem.to_string());
      expect_emulation_matches<hipgrad::bfloat16, 3>(problem, seed += 3, kernels);
      if (HasFailure()) return;
    }
  }
}

TEST(ConvDirectPlan, AutoTakesFewChannelsPerGroup) {
  using Data = hipgrad::conv::BackwardData<hipgrad::half, 2>;
  using Weight = hipgrad::conv::BackwardWeight<hipgrad::half, 2>;
  const Problem<2> depthwise =
      Problem<2>::packed(conv_params<2>(96, 8, 1, 1, {7, 7}, {56, 56}, {1, 1}, {1, 1}, {3, 3}, {3, 3}));
  const ConvParams<2> resnext_params = conv_params<2>(32, 8, 8, 8, {3, 3}, {28, 28}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  // 8 channels per group channels-last: the box path; 4 in NCHW (where the GEMM would run SIMT, and
  // staging would pad the groups to twice their work): direct.
  const Problem<2> resnext = Problem<2>::packed(
      conv_params<2>(32, 8, 4, 4, {3, 3}, {28, 28}, {1, 1}, {1, 1}, {1, 1}, {1, 1}), ConvLayout::kNGCHW);
  const Problem<2> resnext_nhwgc = Problem<2>::packed(resnext_params);
  EXPECT_EQ(Data::name(resnext_nhwgc).find("_direct_"), std::string::npos) << Data::name(resnext_nhwgc);
  const Problem<2> dense =
      Problem<2>::packed(conv_params<2>(1, 8, 64, 64, {3, 3}, {28, 28}, {1, 1}, {1, 1}, {1, 1}, {1, 1}));
  for (const Problem<2>* p : {&depthwise, &resnext}) {
    EXPECT_NE(Data::name(*p).find("_direct_"), std::string::npos) << Data::name(*p);
    EXPECT_NE(Weight::name(*p).find("_direct_"), std::string::npos) << Weight::name(*p);
  }
  // The vector kernels take depthwise channels-last, not NCHW (groups not adjacent) nor multipliers.
  constexpr direct::Kernels kVectors = direct::Kernels::kVectorsWhereTheyApply;
  EXPECT_TRUE((direct::make_data_plan<hipgrad::half, 2>(depthwise, kVectors).vectors));
  EXPECT_TRUE((direct::make_weight_plan<hipgrad::half, 2>(depthwise, hopper_like(), kVectors).vectors));
  EXPECT_FALSE((direct::make_data_plan<hipgrad::half, 2>(depthwise, direct::Kernels::kWindow).vectors));
  const Problem<2> depthwise_nchw = Problem<2>::packed(depthwise.params, ConvLayout::kNGCHW);
  EXPECT_FALSE((direct::make_data_plan<hipgrad::half, 2>(depthwise_nchw, kVectors).vectors));
  EXPECT_FALSE((direct::make_weight_plan<hipgrad::half, 2>(depthwise_nchw, hopper_like(), kVectors).vectors));
  // Over W runs they take NCHW depthwise too, a block's threads walking W.
  constexpr direct::Kernels kWRuns = direct::Kernels::kVectorsAndWRuns;
  const auto nchw_data = direct::make_data_plan<hipgrad::half, 2>(depthwise_nchw, kWRuns);
  EXPECT_TRUE(nchw_data.vectors && nchw_data.vector.layout == direct::LaneLayout::kWRuns);
  EXPECT_EQ(nchw_data.vector.params.block_vectors, 1);
  const auto nchw_weight = direct::make_weight_plan<hipgrad::half, 2>(depthwise_nchw, hopper_like(), kWRuns);
  EXPECT_TRUE(nchw_weight.vectors && nchw_weight.vector.layout == direct::LaneLayout::kWRuns);
  EXPECT_EQ((direct::make_data_plan<hipgrad::half, 2>(depthwise, kWRuns).vector.layout),
            direct::LaneLayout::kAdjacentGroups);
  ConvParams<2> multiplier = depthwise.params;
  multiplier.K = 2;
  EXPECT_FALSE((direct::make_data_plan<hipgrad::half, 2>(Problem<2>::packed(multiplier), kVectors).vectors));
  EXPECT_EQ(Data::name(dense).find("_direct_"), std::string::npos) << Data::name(dense);
  EXPECT_EQ(Weight::name(dense).find("_direct_"), std::string::npos) << Weight::name(dense);
  // Forced, the direct kernels take wider groups too, and say why where they cannot.
  Problem<2> forced = dense;
  forced.algorithm = Algorithm::kDirect;
  EXPECT_NE(Data::name(forced).find("_direct_"), std::string::npos);
  Problem<2> too_wide =
      Problem<2>::packed(conv_params<2>(1, 1, 8, 300, {3, 3}, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {1, 1}));
  too_wide.algorithm = Algorithm::kDirect;
  std::vector<hipgrad::half> storage(1 << 16);
  const Data::Args args{storage.data() + 45000, storage.data() + 20000, storage.data()};
  const Status s = Data::can_implement(too_wide, args);
  EXPECT_EQ(s.code(), hipgrad::StatusCode::kNotSupported) << s.to_string();
  EXPECT_NE(s.message().find("channels per group"), std::string::npos) << s.to_string();
}

template <typename T>
class ConvDirectTest : public ::testing::Test {};
using DirectTypes = ::testing::Types<float, hipgrad::half, hipgrad::bfloat16>;
TYPED_TEST_SUITE(ConvDirectTest, DirectTypes);

/// Both ops on `p` in every layout and padded, forced direct and kAuto, integer and decimal data.
template <typename T, int NDim>
void check_both_ops(const ConvParams<NDim>& p, std::uint64_t seed) {
  std::vector<Problem<NDim>> problems;
  for (ConvLayout layout : {ConvLayout::kNHWGC, ConvLayout::kGNHWC, ConvLayout::kNGCHW})
    problems.push_back(Problem<NDim>::packed(p, layout));
  problems.push_back(hipgrad::test::padded_conv_problem(p, ConvLayout::kNHWGC));
  problems.push_back(hipgrad::test::padded_conv_problem(p, ConvLayout::kNGCHW));
  for (Problem<NDim> problem : problems) {
    for (Algorithm a : {Algorithm::kDirect, Algorithm::kAuto}) {
      problem.algorithm = a;
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        const std::string name = hipgrad::test::check_backward_data<T, NDim>(problem, init, seed++);
        if (a == Algorithm::kDirect) EXPECT_NE(name.find("_direct_"), std::string::npos) << name;
        hipgrad::test::check_backward_weight<T, NDim>(problem, init, seed++);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TYPED_TEST(ConvDirectTest, ListedProblems) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  std::uint64_t seed = 500;
  for (const ConvParams<1>& p : direct_problems_1d()) {
    check_both_ops<TypeParam, 1>(p, seed += 100);
    if (::testing::Test::HasFailure()) return;
  }
  for (const ConvParams<2>& p : direct_problems_2d()) {
    check_both_ops<TypeParam, 2>(p, seed += 100);
    if (::testing::Test::HasFailure()) return;
  }
  for (const ConvParams<3>& p : direct_problems_3d()) {
    check_both_ops<TypeParam, 3>(p, seed += 100);
    if (::testing::Test::HasFailure()) return;
  }
}

template <typename T, int NDim>
void check_random(int count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < count; ++i) {
    Problem<NDim> problem = hipgrad::test::problem_of(random_direct_case<NDim>(rng));
    problem.algorithm = Algorithm::kDirect;
    const InitMethod init = i % 2 ? InitMethod::kDecimals : InitMethod::kIntegers;
    hipgrad::test::check_backward_data<T, NDim>(problem, init, seed + 2 * i);
    hipgrad::test::check_backward_weight<T, NDim>(problem, init, seed + 2 * i + 1);
    if (::testing::Test::HasFailure()) return;
  }
}

TYPED_TEST(ConvDirectTest, SeededRandomProblems) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  check_random<TypeParam, 1>(30, 20261128);
  if (::testing::Test::HasFailure()) return;
  check_random<TypeParam, 2>(30, 20261129);
  if (::testing::Test::HasFailure()) return;
  check_random<TypeParam, 3>(15, 20261130);
}

/// Every direct kernel choice (the ops take the vector kernels where they apply, so the window
/// kernels are forced here, and the vector kernels over W runs, which the ops do not take yet) on
/// every listed and seeded random depthwise problem, channels-last packed, with unaligned rows and
/// NCHW: integer and decimal data.
TYPED_TEST(ConvDirectTest, EveryKernelChoiceMatchesTheReference) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  std::uint64_t seed = 7000;
  auto check = [&seed](const auto& p) {
    constexpr int NDim = std::decay_t<decltype(p)>::kNDimSpatial;
    if (p.C != 1 || p.K != 1 || p.G < direct::kLaneVector) return;
    for (const Problem<NDim>& problem :
         {Problem<NDim>::packed(p), spaced_channels_last(p), Problem<NDim>::packed(p, ConvLayout::kNGCHW)}) {
      for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
        for (direct::Kernels kernels : kEveryKernels) {
          hipgrad::test::check_backward_data<T, NDim>(problem, init, seed++, kernels);
          hipgrad::test::check_backward_weight<T, NDim>(problem, init, seed++, kernels);
        }
      }
    }
  };
  for (const ConvParams<1>& p : direct_problems_1d()) check(p);
  for (const ConvParams<2>& p : direct_problems_2d()) check(p);
  for (const ConvParams<3>& p : direct_problems_3d()) check(p);
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 40 && !::testing::Test::HasFailure(); ++i) {
    hipgrad::test::RandomCase<2> r = random_direct_case<2>(rng);
    r.params.C = r.params.K = 1;
    r.params.G = std::max<Index>(r.params.G, direct::kLaneVector);
    check(r.params);
  }
}

/// Backward-weight over several slices (the op's choice, and split_k 3 and 64 with empty slices)
/// matches the reference, and two runs give the same bits.
TYPED_TEST(ConvDirectTest, WeightSlicesAgreeAndRepeatBitwise) {
  HIPGRAD_SKIP_WITHOUT_GPU();
  using T = TypeParam;
  using Op = hipgrad::conv::BackwardWeight<T, 2>;
  const ConvParams<2> p = conv_params<2>(24, 4, 2, 1, {3, 3}, {40, 37}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  for (int split : {0, 3, 64}) {
    Problem<2> problem = Problem<2>::packed(p);
    problem.split_k = split;
    if (split == 0) EXPECT_GT(Op::splits_of(problem), 1);
    if (split > 0) EXPECT_EQ(Op::splits_of(problem), split);
    for (InitMethod init : {InitMethod::kIntegers, InitMethod::kDecimals}) {
      hipgrad::test::check_backward_weight<T, 2>(problem, init, 900 + split);
      if (::testing::Test::HasFailure()) return;
    }
  }
  const Problem<2> problem = Problem<2>::packed(p);
  hipgrad::host::Tensor<T> x(p.input_lengths(), problem.input_strides), dy(p.output_lengths(), problem.output_strides);
  hipgrad::host::fill(x, InitMethod::kDecimals, 7);
  hipgrad::host::fill(dy, InitMethod::kDecimals, 8);
  std::string name;
  const auto first = hipgrad::test::run_backward_weight<T, 2>(problem, x, dy, &name);
  const auto second = hipgrad::test::run_backward_weight<T, 2>(problem, x, dy, &name);
  EXPECT_EQ(std::memcmp(first.storage().data(), second.storage().data(), first.storage().size() * sizeof(T)), 0)
      << name;
}

}  // namespace
