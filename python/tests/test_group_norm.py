"""hipgrad::group_norm and group_norm_backward (and hipgrad.nn.GroupNorm / GroupNormSiLU) against
PyTorch in float64, on seeded random problems: ranks 2-5, data types and float32 parameters,
memory formats, affine or not, with and without SiLU."""
import random

import pytest

from conftest import require
from references import assert_close, group_norm_reference, in_format

torch, hipgrad = require()

TYPES = [(torch.float32, torch.float32), (torch.float16, torch.float16), (torch.float16, torch.float32),
         (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32)]


def random_problem(seed):
    rng = random.Random(seed)
    rank = rng.choice([2, 3, 4, 4, 5])
    groups = rng.choice([1, 2, 3, 4, 8, 32])
    channels = groups * rng.choice([1, 2, 3, 4, 8, 16])
    sizes = [rng.choice([1, 2, 3, 5])] + [channels] + [rng.choice([1, 3, 7, 16, 17]) for _ in range(rank - 2)]
    fmt = rng.choice(["contiguous", "channels_last", "sliced"] if rank >= 3 else ["contiguous", "sliced"])
    return sizes, groups, rng.choice(TYPES), fmt, rng.random() < 0.8, rng.random() < 0.5


@pytest.mark.parametrize("seed", range(60))
def test_matches_pytorch_in_float64(seed):
    sizes, groups, (dtype, param_dtype), fmt, affine, silu = random_problem(seed)
    x = in_format(torch.randn(sizes, device="cuda").mul_(3).add_(1).to(dtype), fmt)
    dy = in_format(torch.randn(sizes, device="cuda").to(dtype), fmt)
    weight = torch.randn(sizes[1], device="cuda").to(param_dtype) if affine else None
    bias = torch.randn(sizes[1], device="cuda").to(param_dtype) if affine else None
    eps = 1e-5
    y, mean, rstd = torch.ops.hipgrad.group_norm(x, groups, weight, bias, eps, silu)
    assert y.dtype == dtype and y.stride() == torch.empty_like(x).stride()
    assert mean.shape == (sizes[0], groups) and mean.dtype == torch.float32
    mask = [True, affine, affine]
    dx, dweight, dbias = torch.ops.hipgrad.group_norm_backward(dy, x, mean, rstd, weight, bias, groups, silu, mask)
    ref_y, ref_dx, ref_dw, ref_db = group_norm_reference(x, groups, weight, bias, eps, silu, dy)
    what = "%s %s/%s %s affine=%s silu=%s" % (sizes, dtype, param_dtype, fmt, affine, silu)
    assert_close(y, ref_y, dtype, "y " + what)
    assert_close(dx, ref_dx, dtype, "dx " + what)
    if affine:
        assert dweight.dtype == param_dtype and dbias.dtype == param_dtype
        # dγ, dβ sum N × spatial products: scale the tolerance by the data type's rounding
        assert_close(dweight, ref_dw, dtype, "dweight " + what)
        assert_close(dbias, ref_db, dtype, "dbias " + what)
    else:
        assert dweight.numel() == 0 and dbias.numel() == 0


@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_modules_match_torch_modules(affine, silu):
    cls = hipgrad.nn.GroupNormSiLU if silu else hipgrad.nn.GroupNorm
    ours = cls(8, 64, affine=affine).cuda()
    theirs = torch.nn.GroupNorm(8, 64, affine=affine).cuda()
    if affine:
        with torch.no_grad():
            for a, b in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
                a.normal_(), b.copy_(a)
    x = torch.randn(2, 64, 9, 10, device="cuda").to(memory_format=torch.channels_last)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya = ours(xa)
    yb = theirs(xb)
    yb = torch.nn.functional.silu(yb) if silu else yb
    dy = torch.randn_like(ya)
    ya.backward(dy), yb.backward(dy)
    assert_close(ya, yb, torch.float32, "y")
    assert_close(xa.grad, xb.grad, torch.float32, "dx")
    if affine:
        assert_close(ours.weight.grad, theirs.weight.grad, torch.float32, "dweight")
        assert_close(ours.bias.grad, theirs.bias.grad, torch.float32, "dbias")


def test_autocast_keeps_bf16_activations_and_fp32_parameters():
    norm = hipgrad.nn.GroupNormSiLU(4, 32).cuda()
    x = torch.randn(2, 32, 8, 8, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = norm(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert norm.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    ref = group_norm_reference(x, 4, norm.weight, norm.bias, norm.eps, True, torch.ones_like(y))
    assert_close(y, ref[0], torch.bfloat16, "y")
    assert_close(x.grad, ref[1], torch.bfloat16, "dx")
