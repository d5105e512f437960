"""hipgrad for PyTorch: GroupNorm (with fused SiLU) and grouped convolution backward as torch.ops,
with autograd, drop-in modules and hipgrad.convert(model).

    import hipgrad
    model = hipgrad.convert(model)          # GroupNorm and Conv1d/2d/3d run through hipgrad
    hipgrad.backends.benchmark = True       # per problem, keep the faster of hipgrad and PyTorch
"""
import torch

from . import _C  # noqa: F401  registers torch.ops.hipgrad
from . import _ops  # noqa: F401  fake kernels
from . import backends, functional, nn
from .nn import convert

__all__ = ["backends", "convert", "functional", "nn"]
__version__ = "0.1.0"
