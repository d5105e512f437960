"""Drop-in modules: subclasses of PyTorch's, the same parameters and state, hipgrad underneath."""
import torch

from . import functional


class GroupNorm(torch.nn.GroupNorm):
    """torch.nn.GroupNorm, forward and backward by hipgrad (affine=False too)."""

    silu = False

    def forward(self, input):
        return functional.group_norm(input, self.num_groups, self.weight, self.bias, self.eps, silu=self.silu)


class GroupNormSiLU(GroupNorm):
    """GroupNorm followed by SiLU in one pass each way (what a diffusion UNet's ResBlock runs)."""

    silu = True


class _ConvBackward:
    """The forward of torch.nn.ConvNd (padding modes included), backward by hipgrad, or in
    benchmark mode PyTorch's convolution whole where PyTorch's backward was timed faster."""

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            input = torch.nn.functional.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return functional.conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return functional.conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvBackward, torch.nn.Conv1d):
    """torch.nn.Conv1d, backward by hipgrad."""


class Conv2d(_ConvBackward, torch.nn.Conv2d):
    """torch.nn.Conv2d, backward by hipgrad."""


class Conv3d(_ConvBackward, torch.nn.Conv3d):
    """torch.nn.Conv3d, backward by hipgrad."""


_SWAPS = {torch.nn.GroupNorm: GroupNorm, torch.nn.Conv1d: Conv1d, torch.nn.Conv2d: Conv2d, torch.nn.Conv3d: Conv3d}


def convert(model, groupnorm=True, conv=True, fuse_silu=True):
    """Swaps `model`'s GroupNorm and Conv1d/2d/3d modules for hipgrad's, in place, keeping their
    parameters, buffers, hooks and devices (the same objects, their class changed); with
    `fuse_silu`, a GroupNorm followed by nn.SiLU in an nn.Sequential becomes GroupNormSiLU and the
    SiLU an nn.Identity. Subclasses of those modules are left as they are. Returns `model`."""
    kinds = tuple(k for k in _SWAPS if (k is torch.nn.GroupNorm and groupnorm) or (k is not torch.nn.GroupNorm and conv))
    for module in model.modules():
        if type(module) in kinds:
            module.__class__ = _SWAPS[type(module)]
    for module in model.modules():  # after the swaps: a Sequential comes before its children
        if fuse_silu and groupnorm and isinstance(module, torch.nn.Sequential):
            children = list(module._modules.items())
            for (_, first), (name, second) in zip(children, children[1:]):
                if type(first) is GroupNorm and type(second) is torch.nn.SiLU:
                    first.__class__ = GroupNormSiLU
                    module._modules[name] = torch.nn.Identity()
    return model
