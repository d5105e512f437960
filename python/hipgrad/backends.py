"""Switches of hipgrad's modules, in the manner of torch.backends.cudnn.

benchmark (default False): where True, the first call of each problem (sizes, strides, data type,
options) times hipgrad against PyTorch on the call's own tensors, keeps the one that costs a
training step less (the larger of its GPU and host times, measure()), and runs it from then on;
where False, hipgrad always runs. Calls being traced by torch.compile or captured
into a CUDA graph never time anything: they run the kept choice, or hipgrad where there is none
(a convolution traced with symbolic sizes runs hipgrad). A convolution's choice is made in its
backward (C++), when the backward of a problem first runs; the switch is read at its forward.
"""
import time

import torch

from . import _C

benchmark = False

_choices = {}  # problem key -> True where hipgrad is faster


def measure(run, repeats):
    """(GPU ms, host ms) of one run() call, the mean of `repeats` after one warm call, timed while
    a spin kernel holds the GPU back: the events then time the GPU's work and not the host's
    queueing of it (the hold grows until it outlasts the queueing)."""
    run()  # warm: plans, workspace, lazy loading
    cycles = 1 << 21
    while True:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        host_start = time.perf_counter()
        start.record()
        for _ in range(repeats):
            run()
        stop.record()
        host_ms = (time.perf_counter() - host_start) * 1e3
        held = not start.query()
        stop.synchronize()
        if held or cycles >= 1 << 27:
            return start.elapsed_time(stop) / repeats, host_ms / repeats
        cycles *= 4


def time_ms(run, repeats):
    """GPU ms of one run() call (measure's)."""
    return measure(run, repeats)[0]


def _may_time():
    return (benchmark and not torch.compiler.is_compiling() and not torch.cuda.is_current_stream_capturing())


def use_hipgrad(key, run_hipgrad, run_torch, repeats=5):
    """Whether the call of `key` runs hipgrad: always where benchmark is off; else the cheaper of
    run_hipgrad() and run_torch() for a training step, the larger of a call's GPU and host times
    (measure), timed once per key (a key whose hipgrad call raises keeps PyTorch)."""
    if key in _choices:
        return _choices[key]
    if not _may_time():
        return True
    try:
        ours = max(measure(run_hipgrad, repeats))
    except RuntimeError:
        _choices[key] = False
        return False
    _choices[key] = ours <= max(measure(run_torch, repeats))
    return _choices[key]


def choices():
    """The kept choices: {problem key: 'hipgrad' or 'torch'}; a convolution's key is
    ('conv', numbers: data type, device, groups, tf32, mask, then the sizes and strides of x and w
    and the stride, pads and dilation)."""
    kept = {key: "hipgrad" if ours else "torch" for key, ours in _choices.items()}
    kept.update({("conv",) + tuple(key): "hipgrad" if ours else "torch" for key, ours in _C.conv_choices()})
    return kept


def clear():
    """Forgets every kept choice (the next call of each problem times again where benchmark is on)."""
    _choices.clear()
    _C.clear_conv_choices()


def _describe(*tensors):
    return tuple((tuple(t.shape), tuple(t.stride()), t.dtype, t.device.index) for t in tensors if t is not None)
