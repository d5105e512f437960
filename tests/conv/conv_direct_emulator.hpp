/// @file conv_direct_emulator.hpp
/// @brief Runs the direct kernels' plans on the host: every block's threads in turn, phase by
///        phase (stage, then accumulate, the kernels' barriers between), through the same
///        functions the kernels call, on host pointers. A CPU test of the kernels' arithmetic
///        and indexing that needs no GPU.
#pragma once

#include <array>
#include <vector>

#include "hipgrad/ops/conv/direct/launch.hpp"

namespace hipgrad::test {

namespace direct = conv::direct;

template <typename T, int NDim>
void emulate_vector_data(const direct::VectorDataPlan<T, NDim>& plan, const T* dy, const T* w, T* dx) {
  direct::VectorDataParams<T, NDim> p = plan.params;
  p.dy = dy, p.w = w, p.dx = dx;
  const Status s = direct::with_vector_taps(plan.window_taps, [&](auto taps) {
    std::vector<float> shared(plan.shared_bytes / sizeof(float));
    for (int by = 0; by < plan.grid_y; ++by) {
      for (int tid = 0; tid < p.threads; ++tid) direct::stage_vector_taps(p, by, tid, shared.data());
      for (long long bx = 0; bx < plan.grid_x; ++bx) {
        for (int tid = 0; tid < p.threads; ++tid) {
          const direct::VectorDataThread t = direct::vector_data_thread(p, static_cast<int>(bx), by, tid);
          if (!t.works) continue;
          float acc[direct::kRun][direct::kLaneVector] = {};
          direct::accumulate_vector_data<T, NDim, decltype(taps)::value>(p, t, shared.data(), acc);
          direct::store_vector_data(p, t, acc);
        }
      }
    }
    return Status::ok();
  });
  (void)s;
}

template <typename T, int NDim>
void emulate_vector_weight(const direct::VectorWeightPlan<T, NDim>& plan, const T* x, const T* dy, float* partials) {
  direct::VectorWeightParams<T, NDim> p = plan.params;
  p.x = x, p.dy = dy, p.partials = partials;
  const Status s = direct::with_vector_taps(plan.window_taps, [&](auto taps) {
    constexpr int kTaps = decltype(taps)::value;
    std::vector<float> scratch(plan.shared_bytes / sizeof(float));
    for (int by = 0; by < plan.grid_y; ++by) {
      for (int bx = 0; bx < plan.grid_x; ++bx) {
        for (int tid = 0; tid < p.threads; ++tid) {
          const direct::VectorWeightThread t = direct::vector_weight_thread<T, NDim, kTaps>(p, bx, by, tid);
          float acc[kTaps][direct::kLaneVector] = {};
          direct::sum_vector_runs<T, NDim, kTaps>(p, t, acc);
          for (int i = 0; i < kTaps; ++i)
            for (int e = 0; e < direct::kLaneVector; ++e)
              scratch[static_cast<std::size_t>((tid * kTaps + i) * direct::kLaneVector + e)] = acc[i][e];
        }
        for (int e = 0; e < p.combos_per_block * p.block_vectors * kTaps * direct::kLaneVector; ++e)
          direct::write_vector_partial<T, NDim, kTaps>(p, bx, by, e, scratch.data());
      }
    }
    return Status::ok();
  });
  (void)s;
}

template <typename T, int NDim>
void emulate_backward_data(const direct::DataPlan<T, NDim>& plan, const T* dy, const T* w, T* dx) {
  if (plan.vectors) return emulate_vector_data(plan.vector, dy, w, dx);
  direct::DataKernelParams<T, NDim> p = plan.params;
  p.dy = dy, p.w = w, p.dx = dx;
  const Status s = direct::with_window_taps(plan.window_taps, [&](auto taps) {
    constexpr int kTaps = decltype(taps)::value;
    struct Sums {
      float v[direct::kDataRows<NDim>][direct::kRun];
    };
    std::vector<float> shared(plan.shared_bytes / sizeof(float));
    std::vector<Sums> acc(static_cast<std::size_t>(p.threads));
    for (int b = 0; b < static_cast<int>(plan.blocks); ++b) {
      const direct::DataBlock<NDim> blk = direct::data_block(p, b);
      for (Sums& a : acc) a = Sums{};
      for (int k0 = 0; k0 < p.k; k0 += p.k_chunk) {
        const int chunk = p.k - k0 < p.k_chunk ? p.k - k0 : p.k_chunk;
        for (int tid = 0; tid < p.threads; ++tid) direct::stage_data(p, blk, k0, chunk, tid, shared.data());
        for (int tid = 0; tid < p.threads; ++tid) {
          const direct::DataThread th = direct::data_thread(p, blk, tid);
          if (direct::data_thread_works(p, blk, th))
            direct::accumulate_data<T, NDim, kTaps>(p, blk, th, chunk, shared.data(),
                                                    acc[static_cast<std::size_t>(tid)].v);
        }
      }
      for (int tid = 0; tid < p.threads; ++tid) {
        const direct::DataThread th = direct::data_thread(p, blk, tid);
        if (direct::data_thread_works(p, blk, th)) direct::store_data(p, blk, th, acc[static_cast<std::size_t>(tid)].v);
      }
    }
    return Status::ok();
  });
  (void)s;
}

/// The slices' partials added in order into dw, as direct_weight_reduce_kernel.
template <typename T, int NDim>
void reduce_partials(direct::WeightReduceParams<T, NDim> r, const std::vector<float>& partials, T* dw) {
  r.partials = partials.data(), r.dw = dw;
  long long total = static_cast<long long>(r.groups) * r.k * r.c;
  for (int d = 0; d < NDim; ++d) total *= r.filter[d];
  for (long long e = 0; e < total; ++e) direct::reduce_weight_element(r, e, total);
}

template <typename T, int NDim>
void emulate_backward_weight(const direct::WeightPlan<T, NDim>& plan, const T* x, const T* dy, T* dw) {
  std::vector<float> partials(plan.workspace / sizeof(float), -1.0f);
  if (plan.vectors) {
    emulate_vector_weight(plan.vector, x, dy, partials.data());
    reduce_partials(plan.vector.reduce, partials, dw);
    return;
  }
  direct::WeightKernelParams<T, NDim> p = plan.params;
  p.x = x, p.dy = dy, p.partials = partials.data();
  const Status s = direct::with_window_taps(plan.window_taps, [&](auto taps) {
    constexpr int kTaps = decltype(taps)::value;
    std::vector<float> shared(plan.shared_bytes / sizeof(float));
    std::vector<std::array<float, kTaps>> acc(static_cast<std::size_t>(p.threads));
    for (int b = 0; b < static_cast<int>(plan.blocks); ++b) {
      const direct::WeightBlock blk = direct::weight_block(p, b);
      for (auto& a : acc) a.fill(0.0f);
      long long first, end;
      direct::slice_tiles(p, blk, &first, &end);
      for (long long tile = first; tile < end; ++tile) {
        int tile_start[NDim];
        for (int tid = 0; tid < p.threads; ++tid)
          direct::stage_weight_tile(p, blk, tile, tid, shared.data(), tile_start);
        for (int tid = 0; tid < p.threads; ++tid) {
          const direct::WeightThread t = direct::weight_thread<T, NDim, kTaps>(p, blk, tid);
          if (t.active)
            direct::accumulate_weight<T, NDim, kTaps>(p, t, tile_start, shared.data(),
                                                      acc[static_cast<std::size_t>(tid)].data());
        }
      }
      for (int tid = 0; tid < p.threads; ++tid) {
        const direct::WeightThread t = direct::weight_thread<T, NDim, kTaps>(p, blk, tid);
        if (t.slot >= p.slots) continue;
        for (int i = 0; i < kTaps; ++i)
          shared[static_cast<std::size_t>((t.slot * p.lanes + t.lane) * kTaps + i)] =
              acc[static_cast<std::size_t>(tid)][i];
      }
      for (int e = 0; e < p.lanes * p.combos_per_block * kTaps; ++e)
        direct::write_weight_partial<T, NDim, kTaps>(p, blk, e, shared.data());
    }
    return Status::ok();
  });
  (void)s;
  reduce_partials(plan.reduce, partials, dw);
}

}  // namespace hipgrad::test
