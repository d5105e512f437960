"""hipgrad's functions on tensors: GroupNorm (optionally fused with SiLU) forward and backward
through hipgrad, and convolutions whose forward is PyTorch's and whose backward is hipgrad's.

Both fall back to PyTorch where hipgrad cannot take the call (a CPU tensor, float64, more than
three spatial dimensions) and, with hipgrad.backends.benchmark, where PyTorch was timed faster."""
import warnings

import torch
import torch.nn.functional as F

from . import backends

_HIPGRAD_TYPES = (torch.float32, torch.float16, torch.bfloat16)
_FORWARD = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _takes(*tensors):
    return all(t is None or (t.is_cuda and t.dtype in _HIPGRAD_TYPES) for t in tensors)


def _autocast(*tensors):
    """`tensors` in autocast's type where autocast is on for CUDA (as PyTorch's own conv does)."""
    if not torch.is_autocast_enabled("cuda"):
        return tensors
    dtype = torch.get_autocast_dtype("cuda")
    return tuple(None if t is None or not t.is_floating_point() else t.to(dtype) for t in tensors)


# ---- GroupNorm ---------------------------------------------------------------------------------

def _torch_group_norm(input, num_groups, weight, bias, eps, silu):
    y = F.group_norm(input, num_groups, weight, bias, eps)
    return F.silu(y) if silu else y


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, silu=False):
    """torch.nn.functional.group_norm (followed by SiLU where `silu`), forward and backward by
    hipgrad. Under autocast the input keeps its type and weight and bias stay float32 (PyTorch
    would run the whole op in float32)."""
    if not (_takes(input, weight, bias) and 2 <= input.dim() <= 5):
        return _torch_group_norm(input, num_groups, weight, bias, eps, silu)
    if backends.benchmark:
        key = ("group_norm", num_groups, silu, eps, backends._describe(input, weight, bias),
               torch.is_grad_enabled())
        def run_ours():
            _train_step(lambda: torch.ops.hipgrad.group_norm(input, num_groups, weight, bias, eps, silu)[0],
                        input, weight, bias)
        def run_torch():
            _train_step(lambda: _torch_group_norm(input, num_groups, weight, bias, eps, silu), input, weight, bias)
        if not backends.use_hipgrad(key, run_ours, run_torch):
            return _torch_group_norm(input, num_groups, weight, bias, eps, silu)
    return torch.ops.hipgrad.group_norm(input, num_groups, weight, bias, eps, silu)[0]


def _train_step(forward, *tensors):
    """forward() and, where a tensor asks for gradients, its backward (what a training step runs)."""
    leaves = [t for t in tensors if t is not None and t.requires_grad]
    y = forward()
    if leaves and torch.is_grad_enabled():
        torch.autograd.grad(y, leaves, torch.ones_like(y))


# ---- Convolution -------------------------------------------------------------------------------

def conv_pads(padding, kernel, dilation):
    """The left and right pads of a PyTorch padding argument: an int, a tuple, 'valid' or 'same'."""
    n = len(kernel)
    if padding == "valid":
        return [0] * n, [0] * n
    if padding == "same":
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        left = [t // 2 for t in total]
        return left, [t - l for t, l in zip(total, left)]
    pads = [padding] * n if isinstance(padding, int) else list(padding)
    return pads, pads


def _expand(value, n):
    return [value] * n if isinstance(value, int) else list(value)


def _torch_conv_backward(grad_output, input, weight, stride, left, right, dilation, groups, mask):
    """PyTorch's backward of a convolution with pads `left`, `right` (asymmetric ones by padding)."""
    n = input.dim() - 2
    padded = input
    if left != right:
        padded = F.pad(input, [p for l, r in zip(reversed(left), reversed(right)) for p in (l, r)])
    grads = torch.ops.aten.convolution_backward(grad_output, padded, weight, None, stride,
                                                left if left == right else [0] * n, dilation, False, [0] * n,
                                                groups, [mask[0], mask[1], False])
    dx, dw = grads[0], grads[1]
    if dx is not None and left != right:
        for d in range(n):
            dx = dx.narrow(2 + d, left[d], input.size(2 + d))
    return dx, dw


def _hipgrad_conv_backward(grad_output, input, weight, stride, left, right, dilation, groups, mask):
    tf32 = input.dtype == torch.float32 and torch.backends.cudnn.allow_tf32
    dx = dw = None
    if mask[0]:
        dx = torch.ops.hipgrad.conv_backward_data(grad_output, weight, list(input.shape), stride, left, right,
                                                  dilation, groups, tf32)
    if mask[1]:
        dw = torch.ops.hipgrad.conv_backward_weight(grad_output, input, list(weight.shape), stride, left, right,
                                                    dilation, groups, tf32)
    return dx, dw


_warned = set()


class _Conv(torch.autograd.Function):
    """A convolution: forward by PyTorch, backward by hipgrad."""

    @staticmethod
    def forward(input, weight, bias, stride, padding, dilation, groups, left, right):
        # conv() cast the tensors to autocast's type already: autocast leaves them as they are.
        return _FORWARD[input.dim() - 2](input, weight, bias, stride, padding, dilation, groups)

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias, stride, padding, dilation, groups, left, right = inputs
        ctx.save_for_backward(input, weight)
        ctx.conv = (stride, left, right, dilation, groups)
        ctx.has_bias = bias is not None

    @staticmethod
    def backward(ctx, grad_output):
        input, weight = ctx.saved_tensors
        stride, left, right, dilation, groups = ctx.conv
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1]]
        args = (grad_output, input, weight, stride, left, right, dilation, groups, mask)
        dx, dw = conv_backward(*args)
        db = None
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = grad_output.sum([0] + list(range(2, grad_output.dim())))
        return dx, dw, db, None, None, None, None, None, None


def conv_backward(grad_output, input, weight, stride, left, right, dilation, groups, mask):
    """(dx, dw) of a convolution (None where `mask` declines): hipgrad's, or PyTorch's where hipgrad
    cannot take it, refuses it (with a warning, once per problem) or benchmark mode chose it."""
    if not _takes(grad_output, input, weight):
        return _torch_conv_backward(grad_output, input, weight, stride, left, right, dilation, groups, mask)
    args = (grad_output, input, weight, stride, left, right, dilation, groups, mask)
    if backends.benchmark:
        key = ("conv", tuple(stride), tuple(left), tuple(right), tuple(dilation), groups, tuple(mask),
               torch.backends.cudnn.allow_tf32, backends._describe(grad_output, input, weight))
        if not backends.use_hipgrad(key, lambda: _hipgrad_conv_backward(*args), lambda: _torch_conv_backward(*args)):
            return _torch_conv_backward(*args)
    try:
        return _hipgrad_conv_backward(*args)
    except RuntimeError as error:
        if torch.compiler.is_compiling() or "hipgrad: " not in str(error):
            raise
        key = (tuple(input.shape), tuple(weight.shape), input.dtype)
        if key not in _warned:
            _warned.add(key)
            warnings.warn("hipgrad refused a convolution backward, PyTorch runs it: %s" % error)
        return _torch_conv_backward(*args)


def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d/2d/3d (by the input's rank), backward by hipgrad."""
    n = input.dim() - 2
    if n not in _FORWARD:
        raise ValueError("hipgrad.functional.conv takes 1 to 3 spatial dimensions, got input sizes %s"
                         % (tuple(input.shape),))
    stride, dilation = _expand(stride, n), _expand(dilation, n)
    left, right = conv_pads(padding, weight.shape[2:], dilation)
    input, weight, bias = _autocast(input, weight, bias)
    return _Conv.apply(input, weight, bias, stride, padding, dilation, groups, left, right)
