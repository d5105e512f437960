"""hipgrad's functions on tensors: GroupNorm (optionally fused with SiLU) forward and backward
through hipgrad, and convolutions whose forward is PyTorch's and whose backward is hipgrad's.

Both fall back to PyTorch where hipgrad cannot take the call (a CPU tensor, float64) and, with
hipgrad.backends.benchmark, where PyTorch was timed faster. Eager calls of plain tensors go to the
operators through the extension's own entries, which skip torch.ops' matching of Python
arguments against the schema; traced calls go through torch.ops."""
import torch
import torch.nn.functional as F

from . import _C, backends

_HIPGRAD_TYPES = (torch.float32, torch.float16, torch.bfloat16)
_FORWARD = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _takes(*tensors):
    return all(t is None or (t.is_cuda and t.dtype in _HIPGRAD_TYPES) for t in tensors)


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
    if _eager(input, weight, bias):
        return _C.group_norm(input, num_groups, weight, bias, eps, silu)
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


def _eager(*tensors):
    """Whether a call may take the extension's direct entry (_C.conv, _C.group_norm) instead of
    torch.ops: plain tensors, nothing tracing or overriding torch functions (those see torch.ops)."""
    return (all(t is None or type(t) in _PLAIN for t in tensors) and not torch.compiler.is_compiling()
            and not torch._C._is_torch_function_mode_enabled())


_PLAIN = (torch.Tensor, torch.nn.Parameter)
_CONV_ARGS = {}  # (stride, padding, dilation, kernel) -> the op's stride, left, right, dilation lists


def _conv_args(stride, padding, dilation, kernel):
    key = (stride, padding, dilation, kernel)
    try:
        args = _CONV_ARGS.get(key)
    except TypeError:  # a list among the arguments: computed each call
        args, key = None, None
    if args is None:
        n = len(kernel)
        stride, dilation = _expand(stride, n), _expand(dilation, n)
        left, right = conv_pads(padding, kernel, dilation)
        args = (stride, left, right, dilation)
        if key is not None and len(_CONV_ARGS) < 4096:
            _CONV_ARGS[key] = args
    return args


def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d/2d/3d (by the input's rank), backward by hipgrad: one operator,
    hipgrad::conv, whose autograd (C++) runs hipgrad's backward, or PyTorch's convolution whole
    where hipgrad cannot take the tensors (a CPU tensor, float64) or benchmark mode timed
    PyTorch's backward faster, and PyTorch's backward where hipgrad refuses the problem (with a
    warning, once). TF32 as torch.backends.cudnn.allow_tf32 says."""
    if input.dim() - 2 not in _FORWARD:
        raise ValueError("hipgrad.functional.conv takes 1 to 3 spatial dimensions, got input sizes %s"
                         % (tuple(input.shape),))
    stride, left, right, dilation = _conv_args(stride, padding, dilation, tuple(weight.shape[2:]))
    choice = 2 if backends.benchmark else 0
    # Under autocast the op casts input, weight and bias as PyTorch's own convolution does (C++).
    if _eager(input, weight, bias):
        return _C.conv(input, weight, bias, stride, left, right, dilation, groups, choice)
    return torch.ops.hipgrad.conv(input, weight, bias, stride, left, right, dilation, groups,
                                  torch.backends.cudnn.allow_tf32, choice)
