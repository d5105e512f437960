"""Fake (meta) kernels of the operators that hipgrad/_C registers (torch.ops.hipgrad); their
autograd is C++ (csrc/autograd.cpp), and hipgrad::conv's forward is PyTorch's own, fakes included.

The fake kernels give the outputs the sizes, strides and types the CUDA kernels do (csrc/ops.cpp),
so that torch.compile and FakeTensor tracing see what will run."""
import torch


def channels_last(t):
    """Whether PyTorch keeps `t` channels-last and not also contiguous (ops.cpp's rule)."""
    if t.is_contiguous():
        return False
    if t.dim() == 4:
        return t.is_contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.is_contiguous(memory_format=torch.channels_last_3d)
    return (t.dim() == 3 and t.stride(1) == 1 and t.stride(2) == t.size(1)
            and t.stride(0) == t.size(1) * t.size(2))


def empty_in_layout(sizes, last, like):
    """An uninitialised tensor of `sizes`, channels-last (N, spatial..., C) or contiguous."""
    if not last:
        return like.new_empty(sizes)
    strides = [0] * len(sizes)
    stride = 1
    strides[1], stride = stride, stride * sizes[1]
    for d in range(len(sizes) - 1, 1, -1):
        strides[d], stride = stride, stride * sizes[d]
    strides[0] = stride
    return like.new_empty_strided(sizes, strides)


@torch.library.register_fake("hipgrad::group_norm")
def _group_norm_fake(input, num_groups, weight, bias, eps, silu):
    stats = input.new_empty((input.size(0), num_groups), dtype=torch.float32)
    return torch.empty_like(input), stats, torch.empty_like(stats)


@torch.library.register_fake("hipgrad::group_norm_backward")
def _group_norm_backward_fake(grad_output, input, mean, rstd, weight, bias, num_groups, silu, output_mask):
    params = weight if weight is not None else input
    channels = input.size(1)
    dx = torch.empty_like(input) if output_mask[0] else input.new_empty((0,))
    dgamma = params.new_empty((channels if output_mask[1] else 0,))
    dbeta = params.new_empty((channels if output_mask[2] else 0,))
    return dx, dgamma, dbeta


@torch.library.register_fake("hipgrad::conv_backward_data")
def _conv_backward_data_fake(grad_output, weight, input_size, stride, padding, padding_right, dilation, groups,
                             allow_tf32):
    return empty_in_layout(list(input_size), channels_last(grad_output), grad_output)


@torch.library.register_fake("hipgrad::conv_backward_weight")
def _conv_backward_weight_fake(grad_output, input, weight_size, stride, padding, padding_right, dilation, groups,
                               allow_tf32):
    return empty_in_layout(list(weight_size), channels_last(input), grad_output)
