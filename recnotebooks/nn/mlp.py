"""Multi-layer perceptrons for DLRM's bottom (dense features) and top (click) towers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from recnotebooks.checks import check_fits_memory, check_int, check_int_list, check_module_device, show

__all__ = ["MLP"]


class MLP(nn.Sequential):
    """Linear layers with ReLU between them; ``final_relu`` adds one after the last layer.

    Weights are initialised as in the dlrm reference implementation:
    ``N(0, sqrt(2 / (fan_in + fan_out)))`` weights and ``N(0, sqrt(1 / fan_out))`` biases.
    ``device`` as :class:`~recnotebooks.nn.EmbeddingBagCollection`'s; layers larger than the
    memory available there are refused (``ValueError``, in bytes) before anything is allocated.
    """

    def __init__(
        self,
        in_features: int,
        widths: Sequence[int],
        final_relu: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        generator: torch.Generator | None = None,
    ) -> None:
        in_features = check_int("in_features", in_features, lo=1)
        widths = tuple(check_int_list("widths", widths, lo=1, min_len=1))
        device = check_module_device("device", device)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {show(dtype)}")
        params = sum((i + 1) * o for i, o in zip((in_features, *widths[:-1]), widths, strict=True))
        check_fits_memory(
            f"the MLP {in_features}-{'-'.join(map(str, widths))} ({params:,} parameters, {dtype})",
            params * dtype.itemsize,
            device,
            hint="use narrower layers",
        )
        layers: list[nn.Module] = []
        fan_in = in_features
        for i, w in enumerate(widths):
            lin = nn.Linear(fan_in, w, device=device, dtype=dtype)
            with torch.no_grad():
                std = math.sqrt(2.0 / (fan_in + w))
                lin.weight.copy_(torch.randn(w, fan_in, generator=generator) * std)
                lin.bias.copy_(torch.randn(w, generator=generator) * math.sqrt(1.0 / w))
            layers.append(lin)
            if i < len(widths) - 1 or final_relu:
                layers.append(nn.ReLU(inplace=True))
            fan_in = w
        super().__init__(*layers)
        self.in_features = in_features
        self.widths = widths
