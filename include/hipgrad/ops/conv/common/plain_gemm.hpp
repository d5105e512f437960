/// @file plain_gemm.hpp
/// @brief Backward-data of a 1×1 filter with unit strides and no padding, in one group, is a plain
///        GEMM: dx[(n, x), c] = Σ_k dy[(n, x), k] · w[k, c], when the rows (n, x...) of dy and dx
///        each walk memory at one stride. With channels-last dy and C-contiguous weights it runs
///        on the tile GEMM's dense operands (the TMA kernel where aligned).
#pragma once

#include <optional>
#include <vector>

#include "hipgrad/core/strides.hpp"
#include "hipgrad/ops/conv/problem.hpp"
#include "hipgrad/gemm/collective/epilogue.hpp"
#include "hipgrad/gemm/collective/operand_loader.hpp"

namespace hipgrad::conv::detail {

/// The stride at which dimensions `dims` (outermost first) of a tensor follow each other as one
/// index (the last fastest), if they do: each dimension's stride is the next one's times its
/// length. Dimensions of length 1 may have any stride.
inline std::optional<Index> merged_stride(const std::vector<Index>& lengths, const std::vector<Index>& strides,
                                          const std::vector<std::size_t>& dims) {
  std::optional<Index> stride;  // of the innermost dimension of more than one element
  Index span = 1;               // elements of the dimensions inside the current one
  for (std::size_t i = dims.size(); i-- > 0;) {
    const std::size_t d = dims[i];
    if (lengths[d] == 1) continue;
    if (!stride) {
      stride = strides[d];
    } else if (strides[d] != span * *stride) {
      return std::nullopt;
    }
    span *= lengths[d];
  }
  return stride ? stride : std::optional<Index>(1);
}

/// The dimensions [from, rank) of a tensor of `rank` dimensions, after `first` where given.
inline std::vector<std::size_t> merged_dims(std::size_t rank, std::size_t from, std::optional<std::size_t> first) {
  std::vector<std::size_t> dims;
  if (first) dims.push_back(*first);
  for (std::size_t d = from; d < rank; ++d) dims.push_back(d);
  return dims;
}

/// The stride at which the rows (n, spatial...) of an activation tensor [G, N, C, spatial...]
/// follow each other as one index, if they do (merged_stride).
inline std::optional<Index> merged_row_stride(const std::vector<Index>& lengths, const std::vector<Index>& strides) {
  return merged_stride(lengths, strides, merged_dims(lengths.size(), 3, std::size_t{1}));
}

/// The stride at which the spatial dimensions of a tensor [G, N or K, C or K, spatial...] follow
/// each other as one index, if they do (merged_stride).
inline std::optional<Index> merged_position_stride(const std::vector<Index>& lengths,
                                                   const std::vector<Index>& strides) {
  return merged_stride(lengths, strides, merged_dims(lengths.size(), 3, std::nullopt));
}

/// Whether backward-data of `problem` is one plain GEMM: one group, every filter length 1, unit
/// strides, no padding, dy and dx rows that merge, channels-last dy and C-contiguous weights.
template <int NDim>
bool is_plain_gemm(const Problem<NDim>& problem) {
  const ConvParams<NDim>& p = problem.params;
  if (p.G != 1 || problem.output_strides[2] != 1 || problem.weight_strides[2] != 1) return false;
  for (int d = 0; d < NDim; ++d) {
    if (p.filter[d] != 1 || p.strides[d] != 1 || p.left_pads[d] != 0 || p.right_pads[d] != 0) return false;
  }
  return merged_row_stride(p.output_lengths(), problem.output_strides) &&
         merged_row_stride(p.input_lengths(), problem.input_strides);
}

/// The GEMM's rows: N × the spatial positions.
template <int NDim>
Index plain_gemm_rows(const Problem<NDim>& problem) {
  Index m = problem.params.N;
  for (int d = 0; d < NDim; ++d) m *= problem.params.input[d];
  return m;
}

/// A = dy [rows, K] (K-contiguous), B = w [K, C] (C-contiguous), C = dx [rows, C].
template <typename T>
struct PlainGemm {
  gemm::DenseOperand<T, true> a;
  gemm::DenseOperand<T, false> b;
  gemm::LinearCombination<T> epilogue;
};

template <typename T, int NDim>
PlainGemm<T> plain_gemm(const Problem<NDim>& problem, const T* dy, const T* w, T* dx) {
  const ConvParams<NDim>& p = problem.params;
  const auto m = static_cast<int>(plain_gemm_rows(problem));
  const Index dy_rows = *merged_row_stride(p.output_lengths(), problem.output_strides);
  const Index dx_rows = *merged_row_stride(p.input_lengths(), problem.input_strides);
  PlainGemm<T> g{};
  g.a = {dy, dy_rows, m, static_cast<int>(p.K)};
  g.b = {w, problem.weight_strides[1], static_cast<int>(p.C), static_cast<int>(p.K)};
  g.epilogue = {dx, dx_rows, problem.input_strides[2], m, static_cast<int>(p.C), 1.0f, 0.0f, nullptr};
  return g;
}

}  // namespace hipgrad::conv::detail
