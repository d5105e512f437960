"""Trains a latent-diffusion UNet and a ConvNeXt (models.py) from one initialisation three ways
on synthetic data (no downloads): PyTorch in bf16 autocast, the same with hipgrad.convert and
benchmark mode, and PyTorch in fp32 (the control that says how far bf16 alone moves the losses).
Prints each run's step time, the loss gap between hipgrad and PyTorch against the bound, and a
profiler table of the hipgrad run's kernels.

    python examples/pytorch/train.py                          # one GPU: 64x64 latents (Stable Diffusion's), batch 32
    python examples/pytorch/train.py --size 32 --batch 64     # smaller maps: a step that waits on the host
    torchrun --nproc_per_node=2 examples/pytorch/train.py     # DistributedDataParallel, NCCL

The bound: losses are compared as means over windows of 20 steps. bf16 rounds each activation to
8 significant bits, and training amplifies such differences step by step, so two bf16 runs that
round in different places (hipgrad keeps GroupNorm in bf16 with fp32 statistics, PyTorch's
autocast runs it in fp32; the convolutions' sums are ordered differently) drift apart by about as
much as bf16 drifts from fp32. A window passes where |hipgrad - PyTorch| <= 3 x |PyTorch fp32 -
PyTorch bf16| + 2% of the PyTorch loss."""
import argparse
import copy
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

import hipgrad  # noqa: E402

WINDOW = 20


def unet_batch(step, batch, generator, size):
    """Noisy smooth latents (size x size) and the noise level as a fifth channel; the target is the noise."""
    generator.manual_seed(1000 + step)
    low = torch.randn(batch, 4, 8, 8, device="cuda", generator=generator)
    x0 = F.interpolate(low, size=size, mode="bilinear", align_corners=False)
    noise = torch.randn(batch, 4, size, size, device="cuda", generator=generator)
    level = torch.rand(batch, 1, 1, 1, device="cuda", generator=generator)
    noisy = level.sqrt() * x0 + (1 - level).sqrt() * noise
    inputs = torch.cat([noisy, level.expand(batch, 1, size, size)], 1)
    return inputs, noise


def convnext_batch(step, batch, generator, teacher, size):
    """Random images (size x size) labelled by a fixed random linear map of their 8x8 average (learnable)."""
    generator.manual_seed(2000 + step)
    images = torch.randn(batch, 3, size, size, device="cuda", generator=generator)
    labels = (F.adaptive_avg_pool2d(images, 8).flatten(1) @ teacher).argmax(1)
    return images, labels


def make(name):
    torch.manual_seed(0)
    if name == "unet":
        return models.UNet(), 2e-4
    return models.ConvNeXt(), 1e-3


def batch_of(name, step, batch, generator, teacher, size):
    if name == "unet":
        return unet_batch(step, batch, generator, size)
    return convnext_batch(step, batch, generator, teacher, size)


def train(name, model, lr, steps, batch, size, precision, rank, world):
    """Losses of `steps` steps (the global batch's mean) and the mean step time past the warm-up."""
    model = model.cuda().to(memory_format=torch.channels_last)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch.Generator(device="cuda")
    teacher = torch.randn(192, 100, device="cuda", generator=torch.Generator(device="cuda").manual_seed(7))
    share = slice(rank * batch // world, (rank + 1) * batch // world)
    losses, warm, start = [], min(10, steps // 2), None
    for step in range(steps):
        if step == warm:
            torch.cuda.synchronize()
            start = time.perf_counter()
        inputs, target = batch_of(name, step, batch, generator, teacher, size)
        inputs, target = inputs[share].contiguous(memory_format=torch.channels_last), target[share]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(inputs)
            loss = F.mse_loss(out.float(), target) if name == "unet" else F.cross_entropy(out.float(), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        reported = loss.detach().clone()
        if world > 1:
            dist.all_reduce(reported)
            reported /= world
        losses.append(reported)
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - start) * 1e3 / (steps - warm)
    return [l.item() for l in losses], step_ms


def windows(losses):
    return [sum(losses[i:i + WINDOW]) / WINDOW for i in range(0, len(losses) - WINDOW + 1, WINDOW)]


def profile(name, model, lr, batch, size):
    """The hipgrad run's kernels over three steps: the profiler's table, the hipgrad rows first."""
    from torch.profiler import ProfilerActivity, profile as run_profiler
    model = model.cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch.Generator(device="cuda")
    teacher = torch.randn(192, 100, device="cuda")
    with run_profiler(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for step in range(3):
            inputs, target = batch_of(name, step, batch, generator, teacher, size)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(inputs.contiguous(memory_format=torch.channels_last))
                loss = F.mse_loss(out.float(), target) if name == "unet" else F.cross_entropy(out.float(), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    ours = [e for e in events if "hipgrad" in e.key]
    total = sum(e.device_time_total for e in events)
    print("profiler, %s with hipgrad: %d hipgrad kernels, %.1f%% of GPU time" % (
        name, len(ours), 100 * sum(e.device_time_total for e in ours) / max(total, 1)))
    print(events.table(sort_by="self_device_time_total", row_limit=14, max_name_column_width=70))
    print(events.table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=70))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="unet,convnext")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32, help="global batch")
    parser.add_argument("--size", type=int, default=64,
                        help="the UNet's latent side (Stable Diffusion's 512-pixel images: 64); ConvNeXt's images are twice it")
    parser.add_argument("--out", help="write the losses as JSON here")
    parser.add_argument("--compare", help="a JSON file of a run to compare losses with (e.g. one GPU)")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
    hipgrad.backends.benchmark = True
    results, failed = {}, False
    for name in args.models.split(","):
        base, lr = make(name)
        runs = {}
        for run in ("torch_bf16", "hipgrad_bf16", "torch_fp32"):
            model = copy.deepcopy(base)
            if run.startswith("hipgrad"):
                hipgrad.convert(model)
            size = args.size if name == "unet" else 2 * args.size
            runs[run] = train(name, model, lr, args.steps, args.batch, size, run[-4:], rank, world)
        results[name] = {run: {"losses": l, "step_ms": ms} for run, (l, ms) in runs.items()}
        t, h, f = (windows(runs[r][0]) for r in ("torch_bf16", "hipgrad_bf16", "torch_fp32"))
        gaps = [abs(a - b) for a, b in zip(h, t)]
        bounds = [3 * abs(c - b) + 0.02 * b for b, c in zip(t, f)]
        ok = all(g <= b for g, b in zip(gaps, bounds))
        failed |= not ok
        if rank == 0:
            ms = {r: runs[r][1] for r in runs}
            print("%s: step ms PyTorch bf16 %.2f, hipgrad bf16 %.2f (%.2fx), PyTorch fp32 %.2f" % (
                name, ms["torch_bf16"], ms["hipgrad_bf16"], ms["torch_bf16"] / ms["hipgrad_bf16"], ms["torch_fp32"]))
            print("%s: window losses PyTorch %s" % (name, " ".join("%.4f" % v for v in t)))
            print("%s: window losses hipgrad %s" % (name, " ".join("%.4f" % v for v in h)))
            print("%s: largest gap / bound %.3f: %s" % (
                name, max(g / b for g, b in zip(gaps, bounds)), "agree" if ok else "DIFFER"))
        if rank == 0 and world == 1 and not args.no_profile:
            profile(name, hipgrad.convert(copy.deepcopy(base)), lr, args.batch, size)
    if rank == 0:
        choices = hipgrad.backends.choices()
        print("benchmark mode kept hipgrad for %d of %d problems" % (
            sum(v == "hipgrad" for v in choices.values()), len(choices)))
        for key, choice in choices.items():
            print("  kept %-7s %s" % (choice, str(key)[:160]))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(results, f)
        if args.compare:
            other = json.load(open(args.compare))
            for name in results:
                for run in ("torch_bf16", "hipgrad_bf16"):
                    a, b = windows(results[name][run]["losses"]), windows(other[name][run]["losses"])
                    worst = max(abs(x - y) / y for x, y in zip(a, b))
                    print("%s %s: %d GPUs against the compared run: largest window gap %.2f%%" % (
                        name, run, world, 100 * worst))
    if world > 1:
        dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
