"""hipgrad's torch ops beside PyTorch's native ones, in one process on one GPU:

1. host cost: microseconds a call takes on the CPU (tiny tensors, so the GPU never holds the
   host back) for each hipgrad op and the native op it stands beside;
2. GPU time: ms of each op on shapes of real networks (the few-channels list of bench_conv in
   NCHW and channels-last, GroupNorm of a diffusion UNet), the ratio to PyTorch (>1: hipgrad faster).

    python python/benchmarks/bench_ops.py [--only host|gpu]
"""
import argparse
import time

import torch

import hipgrad


def host_us(fn, calls=3000):
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed * 1e6 / calls


def gpu_ms(fn, repeats=20):
    return hipgrad.backends.time_ms(fn, repeats)


def channels_last(t):
    """`t` with the same values laid out (N, spatial..., C), any rank."""
    order = [0] + list(range(2, t.dim())) + [1]
    return t.permute(order).contiguous().permute([0, t.dim() - 1] + list(range(1, t.dim() - 1)))


def conv_calls(n, g, c, k, kernel, spatial, stride, pad, dtype, last):
    """hipgrad's and PyTorch's data and weight gradient calls of one convolution."""
    dims = len(kernel)
    x = torch.randn([n, g * c] + spatial, device="cuda", dtype=dtype)
    w = torch.randn([g * k, c] + kernel, device="cuda", dtype=dtype)
    out = [(i + 2 * p - kk) // s + 1 for i, p, kk, s in zip(spatial, pad, kernel, stride)]
    dy = torch.randn([n, g * k] + out, device="cuda", dtype=dtype)
    if last:
        x, w, dy = (channels_last(t) for t in (x, w, dy))
    ones = [1] * dims
    ours = {
        "data": lambda: torch.ops.hipgrad.conv_backward_data(dy, w, list(x.shape), stride, pad, pad, ones, g, False),
        "weight": lambda: torch.ops.hipgrad.conv_backward_weight(dy, x, list(w.shape), stride, pad, pad, ones, g,
                                                                 False),
    }
    theirs = {
        op: (lambda mask: lambda: torch.ops.aten.convolution_backward(dy, x, w, None, stride, pad, ones, False,
                                                                       [0] * dims, g, mask))(mask)
        for op, mask in (("data", [True, False, False]), ("weight", [False, True, False]))
    }
    return ours, theirs


def host_table():
    print("host us per call (tiny tensors; lower is better)")
    x = torch.randn(2, 32, 4, 4, device="cuda")
    w, b = torch.randn(32, device="cuda"), torch.randn(32, device="cuda")
    y, mean, rstd = torch.ops.hipgrad.group_norm(x, 8, w, b, 1e-5, False)
    _, nmean, nrstd = torch.ops.aten.native_group_norm(x, w, b, 2, 32, 16, 8, 1e-5)
    rows = [
        ("group_norm", lambda: torch.ops.hipgrad.group_norm(x, 8, w, b, 1e-5, False),
         lambda: torch.ops.aten.native_group_norm(x, w, b, 2, 32, 16, 8, 1e-5)),
        ("group_norm_backward",
         lambda: torch.ops.hipgrad.group_norm_backward(y, x, mean, rstd, w, b, 8, False, [True, True, True]),
         lambda: torch.ops.aten.native_group_norm_backward(y, x, nmean, nrstd, w, 2, 32, 16, 8, [True, True, True])),
    ]
    ours, theirs = conv_calls(2, 1, 16, 16, [3, 3], [4, 4], [1, 1], [1, 1], torch.float16, True)
    rows += [("conv_backward_" + op, ours[op], theirs[op]) for op in ("data", "weight")]
    gn_ours, gn_torch = hipgrad.nn.GroupNorm(8, 32).cuda(), torch.nn.GroupNorm(8, 32).cuda()
    rows.append(("nn.GroupNorm forward", lambda: gn_ours(x), lambda: gn_torch(x)))
    conv_ours = hipgrad.nn.Conv2d(32, 32, 3, padding=1).cuda()
    conv_torch = torch.nn.Conv2d(32, 32, 3, padding=1).cuda()
    xg = x.detach().requires_grad_()
    rows.append(("nn.Conv2d forward+backward", lambda: conv_ours(xg).sum().backward(),
                 lambda: conv_torch(xg).sum().backward()))
    rows.append(("nn.GroupNorm fwd+bwd", lambda: gn_ours(xg).sum().backward(), lambda: gn_torch(xg).sum().backward()))
    for name, ours_call, native_call in rows:
        ours_us, native_us = host_us(ours_call), host_us(native_call)
        print("  %-24s hipgrad %6.1f  native %6.1f  ratio %.2f" % (name, ours_us, native_us, ours_us / native_us))


FEW = [  # name, G, N, K, C (per group), filter, input, stride, pad: bench_conv's few-channels list
    ("convnext_t_s1_dw7", 96, 32, 1, 1, [7, 7], [56, 56], [1, 1], [3, 3]),
    ("mobilenetv2_dw3s2_56", 144, 64, 1, 1, [3, 3], [56, 56], [2, 2], [1, 1]),
    ("resnext50_s1_g32x4", 32, 64, 4, 4, [3, 3], [56, 56], [1, 1], [1, 1]),
    ("resnext50_s2_g32x8", 32, 64, 8, 8, [3, 3], [28, 28], [1, 1], [1, 1]),
    ("resnext50_s3_g32x16", 32, 64, 16, 16, [3, 3], [14, 14], [1, 1], [1, 1]),
    ("regnetx_400mf_g10x16", 10, 64, 16, 16, [3, 3], [14, 14], [1, 1], [1, 1]),
    ("resnext50_s4_g32x32", 32, 64, 32, 32, [3, 3], [7, 7], [1, 1], [1, 1]),
    ("regnety_1_6gf_g14x24", 14, 64, 24, 24, [3, 3], [14, 14], [1, 1], [1, 1]),
    ("audio_1d_g16x32", 16, 16, 32, 32, [5], [2000], [1], [2]),
    ("ldm_resblock_320", 1, 8, 320, 320, [3, 3], [64, 64], [1, 1], [1, 1]),
]


def gpu_table():
    print("GPU ms (ratio = PyTorch / hipgrad; > 1: hipgrad faster)")
    for name, g, n, k, c, kernel, spatial, stride, pad in FEW:
        for last in (False, True):
            ours, theirs = conv_calls(n, g, c, k, kernel, spatial, stride, pad, torch.float16, last)
            for op in ("data", "weight"):
                a, b = gpu_ms(ours[op]), gpu_ms(theirs[op])
                print("  conv %-6s %-22s %-13s fp16 hipgrad %.4f  cuDNN %.4f  ratio %.2f" % (
                    op, name, "channels_last" if last else "NCHW", a, b, b / a))
    for shape, groups in (([8, 320, 64, 64], 32), ([8, 640, 32, 32], 32), ([8, 1280, 16, 16], 32)):
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
        w, b = torch.randn(shape[1], device="cuda"), torch.randn(shape[1], device="cuda")
        dy = torch.randn_like(x)
        y, mean, rstd = torch.ops.hipgrad.group_norm(x, groups, w, b, 1e-5, True)
        ours = lambda: (torch.ops.hipgrad.group_norm(x, groups, w, b, 1e-5, True),  # noqa: E731
                        torch.ops.hipgrad.group_norm_backward(dy, x, mean, rstd, w, b, groups, True, [True] * 3))
        xr = x.detach().requires_grad_()
        wr, br = w.detach().requires_grad_(), b.detach().requires_grad_()

        def theirs():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = torch.nn.functional.silu(torch.nn.functional.group_norm(xr, groups, wr, br, 1e-5))
            torch.autograd.grad(out, [xr, wr, br], dy.to(out.dtype))
        a, t = gpu_ms(ours), gpu_ms(theirs)
        print("  group_norm+SiLU fwd+bwd %-18s bf16 (autocast) hipgrad %.4f  PyTorch %.4f  ratio %.2f" % (
            shape, a, t, t / a))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", choices=["host", "gpu"])
    args = parser.parse_args()
    print(torch.cuda.get_device_name(0), "PyTorch", torch.__version__)
    if args.only != "gpu":
        host_table()
    if args.only != "host":
        gpu_table()
