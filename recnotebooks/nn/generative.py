"""A generative recommender that ranks: embeddings per event, an HSTU stack, a top MLP
(:class:`HSTURanker`, the shape of MLPerf's DLRMv4 ranking model at any size).

For the events of a batch of histories (``L`` of them, jagged by ``offsets``)::

    token_t = sum over tables of E_table[id_t]  +  A[action before t]      (L, dim)
    h       = HSTU(token, offsets, timestamps)                               (L, dim)
    logit_t = MLP(h_t)                                                        (L,)

``logit_t`` predicts the action on event ``t`` (did the user like it?). Position ``t`` sees
the events up to and including ``t`` (their ids, the causal mask keeps the future out) and the
actions on the events *before* ``t`` (``A``, an embedding of :data:`~recnotebooks.config.hstu.ACTIONS`),
never the action it predicts. The tables are one :class:`~recnotebooks.nn.EmbeddingBagCollection`
with one id per table per event (a bag of one), so the sparse optimizers of
:mod:`recnotebooks.nn.optim` update only the rows a batch touched, as for a DLRM.
"""

from __future__ import annotations

import torch
from torch import nn

from recnotebooks.checks import check_module_device, show
from recnotebooks.config.hstu import ACTIONS, HSTUConfig
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.mlp import MLP
from recnotebooks.sparse import JaggedBatch

__all__ = ["HSTURanker"]


class HSTURanker(nn.Module):
    """The generative ranking model of ``config`` (see the module docstring).

    ``seed`` draws every initial weight (the tables as the collection draws them; the rest
    from one generator), so two models of one seed are equal."""

    def __init__(self, config: HSTUConfig, device: torch.device | str | None = None, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(config, HSTUConfig):
            raise TypeError(f"config must be an HSTUConfig, got {show(config)}")
        if config.context:  # a contextual token per history: the cost model prices it, the ranker not yet
            raise ValueError(
                "config.context must be empty for HSTURanker (every table looked up per event), "
                f"got {config.context}"
            )
        device = check_module_device("device", device)
        g = torch.Generator().manual_seed(seed)
        self.config = config
        self.embeddings = EmbeddingBagCollection(config.tables, config.dim, device=device, seed=seed)
        self.actions = nn.Embedding(len(ACTIONS), config.dim, device=device)
        nn.init.normal_(self.actions.weight, 0.0, 0.02, generator=g)
        qk, v = config.head_dims
        self.hstu = HSTU(config.dim, config.num_layers, config.heads, config.max_len, qk_dim=qk, v_dim=v,
                         relative_bias=config.relative_bias, device=device, generator=g)  # fmt: skip
        self.top = MLP(config.dim, (*config.top_mlp, 1), final_relu=False, device=device, generator=g)

    def forward(
        self,
        tokens: JaggedBatch,
        offsets: torch.Tensor,
        actions: torch.Tensor,
        timestamps: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits ``(L,)`` of the ``L`` events of the histories ``offsets`` delimits.

        ``tokens``: one id per table per event (``batch_size = L``, keys the table names, in
        order); ``actions``: ``(L,)`` indices into :data:`ACTIONS` of the event before each;
        ``timestamps``: ``(L,)`` seconds, or ``None``."""
        if not isinstance(tokens, JaggedBatch) or tokens.keys != self.embeddings.keys:
            raise ValueError(
                f"tokens must be a JaggedBatch with keys {list(self.embeddings.keys)}, got {show(tokens)}"
            )
        n = tokens.batch_size
        if not isinstance(actions, torch.Tensor) or actions.shape != (n,) or actions.is_floating_point():
            raise ValueError(f"actions must be a ({n},) integer tensor, one per event, got {show(actions)}")
        if n and (int(actions.min()) < 0 or int(actions.max()) >= len(ACTIONS)):
            raise ValueError(
                f"actions must index {list(ACTIONS)} (0 .. {len(ACTIONS) - 1}), got {show(actions)}"
            )
        x = self.embeddings(tokens).sum(dim=1) + self.actions(actions.to(self.actions.weight.device))
        return self.top(self.hstu(x, offsets, timestamps)).squeeze(-1)
