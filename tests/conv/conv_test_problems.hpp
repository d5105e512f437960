/// @file conv_test_problems.hpp
/// @brief Convolution problems the conv tests share: a layout's strides with a gap after every
///        dimension, so that no tensor of the problem is contiguous.
#pragma once

#include "hipgrad/ops/conv/problem.hpp"
#include "reference/reference_test_util.hpp"

namespace hipgrad::test {

template <int NDim>
conv::Problem<NDim> padded_conv_problem(const conv::ConvParams<NDim>& p, conv::ConvLayout layout) {
  conv::Problem<NDim> problem = conv::Problem<NDim>::packed(p, layout);
  problem.input_strides = padded_strides(p.input_lengths(), conv::activation_order<NDim>(layout));
  problem.weight_strides = padded_strides(p.weight_lengths(), conv::weight_order<NDim>(layout));
  problem.output_strides = padded_strides(p.output_lengths(), conv::activation_order<NDim>(layout));
  return problem;
}

}  // namespace hipgrad::test
