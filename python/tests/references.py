"""float64 references (PyTorch's own ops, run in double on the GPU) and the comparisons the tests
share."""
import torch
import torch.nn.functional as F

TOLERANCE = {torch.float32: 2e-4, torch.float16: 2e-2, torch.bfloat16: 6e-2}


# fp32 arithmetic on unit-scale data, absolute: GroupNorm's groups of one element (or constant
# ones) have variance 0 and rstd = 1/sqrt(eps), which scales fp32 rounding of x - mean by ~300.
FLOOR = 2e-4


def assert_close(actual, expected, dtype, what):
    """|actual - expected| <= tol * max |expected| + FLOOR element-wise: tol by the data type
    (inputs rounded to it, sums in fp32), relative to the tensor's scale."""
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    assert torch.isfinite(actual).all(), what
    scale = expected.abs().max().item()
    allowed = TOLERANCE[dtype] * scale + FLOOR
    error = (actual.double() - expected.double()).abs().max().item()
    assert error <= allowed, "%s: max error %.3g, allowed %.3g (scale %.3g)" % (what, error, allowed, scale)


def group_norm_reference(x, num_groups, weight, bias, eps, silu, dy):
    """y, dx, dweight, dbias of GroupNorm (then SiLU) in float64."""
    leaves = [t.detach().double().requires_grad_() if t is not None else None for t in (x, weight, bias)]
    y = F.group_norm(leaves[0], num_groups, leaves[1], leaves[2], eps)
    if silu:
        y = F.silu(y)
    wanted = [t for t in leaves if t is not None]
    grads = torch.autograd.grad(y, wanted, dy.double())
    out = iter(grads)
    return [y.detach()] + [next(out) if t is not None else None for t in leaves]


def conv_reference(x, w, dy, stride, left, right, dilation, groups):
    """dx, dw of a convolution with pads left/right, in float64."""
    n = x.dim() - 2
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    padded = F.pad(xd, [p for l, r in zip(reversed(left), reversed(right)) for p in (l, r)])
    y = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n](padded, wd, None, stride, 0, dilation, groups)
    assert y.shape == dy.shape, (y.shape, dy.shape)
    return torch.autograd.grad(y, [xd, wd], dy.double())


def in_format(t, fmt):
    """`t` (values kept) as 'contiguous', 'channels_last' (N, spatial..., C) or 'sliced' (a view of
    every other element along the last dimension of a larger tensor)."""
    if fmt == "contiguous":
        return t.contiguous()
    if fmt == "channels_last":
        order = [0] + list(range(2, t.dim())) + [1]
        return t.permute(order).contiguous().permute([0, t.dim() - 1] + list(range(1, t.dim() - 1)))
    if fmt == "sliced":
        wide = torch.zeros(list(t.shape[:-1]) + [2 * t.shape[-1]], dtype=t.dtype, device=t.device)
        wide[..., ::2] = t
        return wide[..., ::2]
    raise ValueError(fmt)
