"""Switches of hipgrad's modules, in the manner of torch.backends.cudnn.

benchmark (default False): where True, the first call of each problem (sizes, strides, data type,
options) times hipgrad against PyTorch on the call's own tensors, keeps the faster, and runs it
from then on; where False, hipgrad always runs. Calls being traced by torch.compile or captured
into a CUDA graph never time anything: they run the kept choice, or hipgrad where there is none
(a convolution traced with symbolic sizes runs hipgrad). A convolution's choice is made in its
backward (C++), when the backward of a problem first runs; the switch is read at its forward.
"""
import torch

from . import _C

benchmark = False

_choices = {}  # problem key -> True where hipgrad is faster
_generation = [0]  # counts clear(): modules drop what they remembered of earlier choices


def time_ms(run, repeats):
    """Mean ms of run() on the GPU over `repeats` calls, after one warm call."""
    run()  # warm: plans, workspace, lazy loading
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / repeats


def _may_time():
    return (benchmark and not torch.compiler.is_compiling() and not torch.cuda.is_current_stream_capturing())


def use_hipgrad(key, run_hipgrad, run_torch, repeats=5):
    """Whether the call of `key` runs hipgrad: always where benchmark is off; else the faster of
    run_hipgrad() and run_torch(), timed once per key (a key whose hipgrad call raises keeps PyTorch)."""
    if key in _choices:
        return _choices[key]
    if not _may_time():
        return True
    try:
        ours = time_ms(run_hipgrad, repeats)
    except RuntimeError:
        _choices[key] = False
        return False
    _choices[key] = ours <= time_ms(run_torch, repeats)
    return _choices[key]


def backward_choice():
    """hipgrad::conv's last argument: 2 (the faster, benchmark mode) or 0 (hipgrad)."""
    return 2 if benchmark else 0


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
    _generation[0] += 1


def generation():
    """How many times clear() has run."""
    return _generation[0]


def _describe(*tensors):
    return tuple((tuple(t.shape), tuple(t.stride()), t.dtype, t.device.index) for t in tensors if t is not None)
