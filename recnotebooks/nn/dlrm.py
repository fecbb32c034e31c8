"""The Deep Learning Recommendation Model (:class:`DLRM`, Naumov et al. 2019).

dense features -> bottom MLP ─┐
sparse features -> embedding  ├─> interaction -> top MLP -> click logit
                    bags      ┘
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from recnotebooks.checks import check_fits_memory, check_module_device, show
from recnotebooks.config import DLRMConfig
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.interaction import make_interaction
from recnotebooks.nn.mlp import MLP
from recnotebooks.sparse import JaggedBatch
from recnotebooks.timing import NULL_TIMER, PhaseTimer

__all__ = ["DLRM", "dense_modules"]


def dense_modules(
    config: DLRMConfig,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> tuple[MLP, nn.Module, MLP]:
    """The bottom MLP, interaction and top MLP of ``DLRM(config, device, dtype, seed)``, with the
    same initial weights, without building its embedding tables (a hybrid-parallel rank replicates
    only these)."""
    if not isinstance(config, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig, got {type(config).__name__}")
    gen = torch.Generator().manual_seed(seed)  # the MLPs' own generator: the tables' draws do not move it
    bottom = MLP(config.num_dense, config.bottom_mlp, True, device, dtype, gen)
    features, self_dots = config.num_interaction_features, config.interaction_self
    interaction = make_interaction(
        config.interaction,
        features,
        self_dots,
        width=config.interaction_output_dim,
        dcn_layers=config.dcn_layers,
        dcn_rank=config.dcn_rank,
        device=device,
        dtype=dtype,
        generator=gen,
    ).to(device)
    top = MLP(config.interaction_output_dim, config.top_mlp, False, device, dtype, gen)
    return bottom, interaction, top


class DLRM(nn.Module):
    """DLRM built from a validated :class:`~recnotebooks.config.DLRMConfig`.

    ``forward(dense, sparse)`` returns click **logits** of shape ``(B,)``; apply
    ``torch.sigmoid`` for probabilities (training uses ``BCEWithLogits`` for stability).

    ``embeddings`` replaces the embedding collection built from the config by a prebuilt
    one with the same tables, dimension and pooling (e.g. a cached collection).

    Parameters split in two groups, as DLRM trains them: :meth:`dense_parameters` (MLPs,
    any ``torch.optim`` optimizer) and the embedding weights (sparse row-wise optimizers
    from :mod:`recnotebooks.nn.optim`).

    ``device``: ``None`` (torch's default), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; a device this
    machine lacks is refused. A model whose weights exceed the memory available there (a
    terabyte of tables) is refused with a ``ValueError`` giving both in bytes, before anything
    is allocated.
    """

    def __init__(
        self,
        config: DLRMConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        seed: int = 0,
        embeddings: EmbeddingBagCollection | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(config, DLRMConfig):
            raise TypeError(f"config must be a DLRMConfig, got {type(config).__name__}")
        device = check_module_device("device", device)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {show(dtype)}")
        params = config.dense_parameters + (config.sparse_parameters if embeddings is None else 0)
        check_fits_memory(  # the whole model at once: nothing is half-built when it cannot fit
            f"DLRM {config.name!r} ({params:,} parameters: {config.total_rows:,} embedding rows x dim "
            f"{config.embedding_dim} and the MLPs, {dtype})",
            params * dtype.itemsize,
            device,
            hint="cap the tables' rows (config.with_max_rows(n)) or keep them in host memory behind a "
            "device cache (recnotebooks.cache.CachedEmbeddingBagCollection)",
        )
        self.config = config
        if embeddings is None:
            embeddings = EmbeddingBagCollection(
                config.tables, config.embedding_dim, config.pooling, device=device, dtype=dtype, seed=seed
            )
        elif not isinstance(embeddings, EmbeddingBagCollection):
            raise TypeError(
                f"embeddings must be an EmbeddingBagCollection (or None), got {type(embeddings).__name__}"
            )
        elif (embeddings.tables, embeddings.embedding_dim, embeddings.pooling) != (
            config.tables,
            config.embedding_dim,
            config.pooling,
        ):
            raise ValueError(
                "embeddings must have the config's tables, embedding_dim and pooling: got "
                f"{embeddings.num_tables} tables, dim {embeddings.embedding_dim}, "
                f"pooling {embeddings.pooling!r} for a config with {config.num_tables} tables, "
                f"dim {config.embedding_dim}, pooling {config.pooling!r}"
            )
        self.embeddings = embeddings
        self.bottom_mlp, self.interaction, self.top_mlp = dense_modules(config, device, dtype, seed)

    def dense_parameters(self) -> Iterator[nn.Parameter]:
        """MLP (and cross-layer) parameters: everything but the embedding tables."""
        for name, p in self.named_parameters():
            if not name.startswith("embeddings."):
                yield p

    def batch_logits(self, batch: Any, timer: PhaseTimer = NULL_TIMER) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, labels)``, both ``(B,)``, of a :class:`~recnotebooks.data.batch.Batch`: what
        a trainer's loss and evaluation read (:class:`~recnotebooks.nn.generative.HSTURanker` has
        the same)."""
        return self(batch.dense, batch.sparse, timer), batch.labels

    def forward(
        self, dense: torch.Tensor, sparse: JaggedBatch, timer: PhaseTimer = NULL_TIMER
    ) -> torch.Tensor:
        """Click logits ``(B,)`` of a batch: ``dense`` ``(B, num_dense)``, ``sparse`` the ids of
        ``B`` samples per table (``timer`` records each phase's time)."""
        self._check_inputs(dense, sparse)
        with timer.phase("embedding_forward"):
            pooled = self.embeddings(sparse)  # (B, T, D): one pooled vector per table
        with timer.phase("bottom_mlp"):
            x = self.bottom_mlp(dense)  # (B, num_dense) -> (B, bottom_mlp[-1]); = D for "dot"
        with timer.phase("interaction"):
            z = self.interaction(x, pooled)  # -> (B, interaction_output_dim): pairwise dots, concat or cross
        with timer.phase("top_mlp"):
            out = self.top_mlp(z)  # (B, 1)
        return out.squeeze(1)  # (B,)

    def _check_inputs(self, dense: torch.Tensor, sparse: JaggedBatch) -> None:
        """Refuse a batch the model cannot take, naming what is wrong."""
        if not isinstance(dense, torch.Tensor):
            raise TypeError(f"dense must be a torch.Tensor, got {type(dense).__name__}")
        if not isinstance(sparse, JaggedBatch):
            raise TypeError(f"sparse must be a JaggedBatch, got {type(sparse).__name__}")
        w = self.bottom_mlp[0].weight
        if dense.dtype != w.dtype or dense.device != w.device:
            raise ValueError(
                f"dense must be {w.dtype} on {w.device} like the model, got {dense.dtype} on {dense.device}"
            )
        if dense.dim() != 2 or dense.shape[1] != self.config.num_dense:
            raise ValueError(
                f"dense must have shape (batch, num_dense={self.config.num_dense}), got {tuple(dense.shape)}"
            )
        if dense.shape[0] != sparse.batch_size:
            raise ValueError(f"dense has {dense.shape[0]} rows but sparse.batch_size is {sparse.batch_size}")
