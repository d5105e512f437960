"""Two real architectures, built from PyTorch's own modules (which hipgrad.convert swaps):

* UNet: the latent-diffusion UNet's layout (Rombach et al. 2022) without attention: ResBlocks of
  GroupNorm(32) + SiLU + 3x3 conv, two per level, 2x downsampling by strided conv, skips
  concatenated on the way up, GroupNorm + SiLU + conv out.
* ConvNeXt: ConvNeXt blocks (Liu et al. 2022): 7x7 depthwise conv, a norm (GroupNorm with one
  group here), 1x1 conv to 4x, GELU, 1x1 conv back, residual; a 4x4 stride-4 patchify stem.
"""
import torch
from torch import nn


class ResBlock(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.in_layers = nn.Sequential(nn.GroupNorm(32, cin), nn.SiLU(), nn.Conv2d(cin, cout, 3, padding=1))
        self.out_layers = nn.Sequential(nn.GroupNorm(32, cout), nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1))
        self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.skip(x) + self.out_layers(self.in_layers(x))


class UNet(nn.Module):
    def __init__(self, in_channels=5, out_channels=4, widths=(128, 256, 256)):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, widths[0], 3, padding=1)
        self.down, skips, c = nn.ModuleList(), [widths[0]], widths[0]
        for level, width in enumerate(widths):
            for _ in range(2):
                self.down.append(ResBlock(c, width))
                c = width
                skips.append(c)
            if level < len(widths) - 1:
                self.down.append(nn.Conv2d(c, c, 3, stride=2, padding=1))
                skips.append(c)
        self.middle = nn.Sequential(ResBlock(c, c), ResBlock(c, c))
        self.up = nn.ModuleList()
        for level, width in reversed(list(enumerate(widths))):
            for i in range(3):
                self.up.append(ResBlock(c + skips.pop(), width))
                c = width
            if level > 0:
                self.up.append(nn.Sequential(nn.Upsample(scale_factor=2, mode="nearest"),
                                             nn.Conv2d(c, c, 3, padding=1)))
        self.out = nn.Sequential(nn.GroupNorm(32, c), nn.SiLU(), nn.Conv2d(c, out_channels, 3, padding=1))

    def forward(self, x):
        h = self.conv_in(x)
        stack = [h]
        for block in self.down:
            h = block(h)
            stack.append(h)
        h = self.middle(h)
        for block in self.up:
            h = block(torch.cat([h, stack.pop()], 1)) if isinstance(block, ResBlock) else block(h)
        return self.out(h)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.GroupNorm(1, dim)
        self.pwconv1 = nn.Conv2d(dim, 4 * dim, 1)
        self.act = nn.GELU()
        self.pwconv2 = nn.Conv2d(4 * dim, dim, 1)

    def forward(self, x):
        return x + self.pwconv2(self.act(self.pwconv1(self.norm(self.dwconv(x)))))


class ConvNeXt(nn.Module):
    def __init__(self, classes=100, dims=(64, 128, 256, 512), depths=(2, 2, 4, 2)):
        super().__init__()
        layers = [nn.Conv2d(3, dims[0], 4, stride=4), nn.GroupNorm(1, dims[0])]
        for stage, (dim, depth) in enumerate(zip(dims, depths)):
            if stage > 0:
                layers += [nn.GroupNorm(1, dims[stage - 1]), nn.Conv2d(dims[stage - 1], dim, 2, stride=2)]
            layers += [ConvNeXtBlock(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(dims[-1], classes)

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))
