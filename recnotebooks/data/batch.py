"""A training batch: dense features, jagged sparse features and click labels."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recnotebooks.sparse import JaggedBatch

__all__ = ["Batch"]


@dataclass(frozen=True, eq=False)
class Batch:
    """``dense`` (B, num_dense) float, ``sparse`` a :class:`JaggedBatch`, ``labels`` (B,) in {0, 1}."""

    dense: torch.Tensor
    sparse: JaggedBatch
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.sparse, JaggedBatch):
            raise TypeError(f"sparse must be a JaggedBatch, got {type(self.sparse).__name__}")
        b = self.sparse.batch_size
        if not isinstance(self.dense, torch.Tensor) or self.dense.dim() != 2 or self.dense.shape[0] != b:
            shape = (
                tuple(self.dense.shape) if isinstance(self.dense, torch.Tensor) else type(self.dense).__name__
            )
            raise ValueError(f"dense must be a (batch_size={b}, num_dense) tensor, got {shape}")
        if not self.dense.is_floating_point():
            raise TypeError(f"dense must be floating point, got {self.dense.dtype}")
        if not isinstance(self.labels, torch.Tensor) or tuple(self.labels.shape) != (b,):
            shape = (
                tuple(self.labels.shape)
                if isinstance(self.labels, torch.Tensor)
                else type(self.labels).__name__
            )
            raise ValueError(f"labels must be a (batch_size={b},) tensor, got {shape}")
        if self.dense.device != self.sparse.device or self.labels.device != self.sparse.device:
            raise ValueError(
                f"dense, sparse and labels must be on one device, got {self.dense.device}, "
                f"{self.sparse.device}, {self.labels.device}"
            )
        if b and not bool(((self.labels == 0) | (self.labels == 1)).all()):
            raise ValueError("labels must be 0 or 1 (clicks)")

    @property
    def batch_size(self) -> int:
        return self.sparse.batch_size

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return Batch(
            self.dense.to(device, non_blocking=non_blocking),
            self.sparse.to(device, non_blocking=non_blocking),
            self.labels.to(device, non_blocking=non_blocking),
        )

    def pin_memory(self) -> Batch:
        return Batch(self.dense.pin_memory(), self.sparse.pin_memory(), self.labels.pin_memory())
