"""hipgrad::conv_backward_data and conv_backward_weight (and hipgrad.nn.Conv1d/2d/3d) against
PyTorch in float64, on seeded random problems: 1-D/2-D/3-D, groups incl. depthwise, stride,
dilation, asymmetric pads, data types, memory formats."""
import random

import pytest

from conftest import require
from references import assert_close, conv_reference, in_format

torch, hipgrad = require()


def random_problem(seed):
    rng = random.Random(seed)
    n = rng.choice([1, 2, 2, 3])
    kind = rng.choice(["dense", "grouped", "depthwise", "stem"])
    groups = {"dense": 1, "stem": 1, "grouped": rng.choice([2, 4, 8]), "depthwise": rng.choice([8, 16, 32])}[kind]
    per_c = {"dense": rng.choice([8, 16, 64]), "stem": rng.choice([1, 3, 4]), "grouped": rng.choice([4, 8, 16]),
             "depthwise": 1}[kind]
    per_k = {"depthwise": rng.choice([1, 2])}.get(kind, rng.choice([3, 8, 16, 32]))
    kernel = [rng.choice([1, 3, 5]) for _ in range(n)]
    stride = [rng.choice([1, 1, 2]) for _ in range(n)]
    dilation = [rng.choice([1, 1, 2]) for _ in range(n)]
    left = [rng.choice([0, 1, 2]) for _ in range(n)]
    right = [rng.choice([0, 1, 2]) for _ in range(n)]
    spatial = [rng.choice([5, 8, 13, 16]) for _ in range(n)]
    dtype = rng.choice([torch.float32, torch.float16, torch.bfloat16])
    fmt = rng.choice(["contiguous", "channels_last", "sliced"])
    batch = rng.choice([1, 2, 3])
    return n, groups, per_c, per_k, kernel, stride, dilation, left, right, spatial, dtype, fmt, batch


def output_size(spatial, kernel, stride, dilation, left, right):
    return [(i + l + r - d * (k - 1) - 1) // s + 1
            for i, k, s, d, l, r in zip(spatial, kernel, stride, dilation, left, right)]


@pytest.mark.parametrize("seed", range(80))
def test_matches_pytorch_in_float64(seed):
    n, groups, per_c, per_k, kernel, stride, dilation, left, right, spatial, dtype, fmt, batch = random_problem(seed)
    out = output_size(spatial, kernel, stride, dilation, left, right)
    if min(out) < 1:
        pytest.skip("no output positions")
    torch.backends.cudnn.allow_tf32 = False
    x = in_format(torch.randn([batch, groups * per_c] + spatial, device="cuda").to(dtype), fmt)
    w = in_format(torch.randn([groups * per_k, per_c] + kernel, device="cuda").to(dtype), fmt)
    dy = in_format(torch.randn([batch, groups * per_k] + out, device="cuda").to(dtype), fmt)
    dx = torch.ops.hipgrad.conv_backward_data(dy, w, list(x.shape), stride, left, right, dilation, groups, False)
    dw = torch.ops.hipgrad.conv_backward_weight(dy, x, list(w.shape), stride, left, right, dilation, groups, False)
    ref_dx, ref_dw = conv_reference(x, w, dy, stride, left, right, dilation, groups)
    what = "seed %d: G %d C %d K %d kernel %s stride %s dilation %s pads %s/%s input %s %s %s" % (
        seed, groups, per_c, per_k, kernel, stride, dilation, left, right, [batch] + spatial, dtype, fmt)
    assert dx.dtype == dtype and dw.dtype == dtype
    assert_close(dx, ref_dx, dtype, "dx " + what)
    assert_close(dw, ref_dw, dtype, "dw " + what)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("padding", [1, "same", "valid"])
def test_modules_match_torch_modules(n, padding):
    torch.backends.cudnn.allow_tf32 = False
    cls, ref_cls = {1: (hipgrad.nn.Conv1d, torch.nn.Conv1d), 2: (hipgrad.nn.Conv2d, torch.nn.Conv2d),
                    3: (hipgrad.nn.Conv3d, torch.nn.Conv3d)}[n]
    kernel = 4 if padding == "same" else 3  # an even kernel: 'same' pads asymmetrically
    ours = cls(16, 32, kernel, padding=padding, groups=4).cuda()
    theirs = ref_cls(16, 32, kernel, padding=padding, groups=4).cuda()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn([2, 16] + [9] * n, device="cuda")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    dy = torch.randn_like(ya)
    ya.backward(dy), yb.backward(dy)
    assert_close(ya, yb, torch.float32, "y")
    assert_close(xa.grad, xb.grad, torch.float32, "dx")
    assert_close(ours.weight.grad, theirs.weight.grad, torch.float32, "dweight")
    assert_close(ours.bias.grad, theirs.bias.grad, torch.float32, "dbias")


def test_padding_modes_and_autocast():
    conv = hipgrad.nn.Conv2d(8, 16, 3, padding=1, padding_mode="reflect").cuda()
    ref = torch.nn.Conv2d(8, 16, 3, padding=1, padding_mode="reflect").cuda()
    ref.load_state_dict(conv.state_dict())
    x = torch.randn(2, 8, 12, 12, device="cuda").to(memory_format=torch.channels_last)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        ya, yb = conv(x), ref(x)
    assert ya.dtype == torch.bfloat16
    ya.float().square().sum().backward(), yb.float().square().sum().backward()
    assert conv.weight.grad.dtype == torch.float32
    assert_close(conv.weight.grad, ref.weight.grad, torch.bfloat16, "dweight")


def test_nchw_takes_the_tensor_cores():
    """PyTorch's default format, fp16: hipgrad copies it channels-last (the staged route)."""
    dy = torch.randn(2, 64, 16, 16, device="cuda", dtype=torch.float16)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.float16)
    path = torch.ops.hipgrad.conv_backward_path(dy, w, [2, 64, 16, 16], [1, 1], [1, 1], [1, 1], [1, 1], 1, False,
                                                False)
    assert "_staged_" in path, path
