"""A generative recommender that ranks: embeddings per event, an HSTU stack, a top MLP
(:class:`HSTURanker`, the shape of MLPerf's DLRMv4 ranking model at any size).

For the events of a batch of histories (``L`` of them, jagged by ``offsets``)::

    token_t = sum over event tables of E_table[id_t]  +  A[action before t]   (L, dim)
    c_k     = E_k[context id of the history] W_k + b_k, k a context table     (one per history)
    h       = HSTU([c_1 .. c_C, token_1 .. token_n] of each history)          (L + B C, dim)
    logit_t = MLP(h at event t)                                                (L,)

``logit_t`` predicts the action on event ``t`` (did the user like it?). Position ``t`` sees
the events up to and including ``t`` (their ids, the causal mask keeps the future out) and the
actions on the events *before* ``t`` (``A``, an embedding of :data:`~recnotebooks.config.hstu.ACTIONS`),
never the action it predicts. The tables are one :class:`~recnotebooks.nn.EmbeddingBagCollection`
with one id per table per event (a bag of one), so the sparse optimizers of
:mod:`recnotebooks.nn.optim` update only the rows a batch touched, as for a DLRM.

**Contextual tokens** (``config.context``, MLPerf's DLRMv4: the user and its crosses): a context
table is looked up once a history (:meth:`SequenceBatch.tokens` puts its id in the bag of the
history's first event), mapped by a linear layer of its own, and the ``C`` results are prepended
to the history as tokens at timestamp 0; their outputs are dropped before the top MLP. That is
the reference's ``ContextualPreprocessor`` (``get_contextual_input_embeddings``, a ``baddbmm``
with one weight a contextual position, then ``concat_2D_jagged`` to the left with zero
timestamps; ``recommendation_v4/generative_recommenders/modules/preprocessors.py`` of
https://github.com/mlcommons/training at a67b8459467c551c08f8566d68a8e4e1659e6bd7). An empty
history gets no contextual tokens (it has no event to predict either way).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from recnotebooks.checks import check_module_device, show
from recnotebooks.config.hstu import ACTIONS, HSTUConfig
from recnotebooks.nn.embedding import EmbeddingBagCollection
from recnotebooks.nn.hstu import HSTU
from recnotebooks.nn.mlp import MLP
from recnotebooks.sparse import JaggedBatch
from recnotebooks.timing import NULL_TIMER, PhaseTimer

__all__ = ["HSTURanker"]


class HSTURanker(nn.Module):
    """The generative ranking model of ``config`` (see the module docstring).

    ``seed`` draws every initial weight (the tables as the collection draws them; the rest
    from one generator), so two models of one seed are equal."""

    def __init__(self, config: HSTUConfig, device: torch.device | str | None = None, seed: int = 0) -> None:
        super().__init__()
        if not isinstance(config, HSTUConfig):
            raise TypeError(f"config must be an HSTUConfig, got {show(config)}")
        device = check_module_device("device", device)
        g = torch.Generator().manual_seed(seed)
        self.config = config
        self.embeddings = EmbeddingBagCollection(config.tables, config.dim, device=device, seed=seed)
        self.actions = nn.Embedding(len(ACTIONS), config.dim, device=device)
        nn.init.normal_(self.actions.weight, 0.0, 0.02, generator=g)
        qk, v = config.head_dims
        self.hstu = HSTU(config.dim, config.num_layers, config.heads, config.sequence_len, qk_dim=qk, v_dim=v,
                         relative_bias=config.relative_bias, device=device, generator=g)  # fmt: skip
        self.top = MLP(config.dim, (*config.top_mlp, 1), final_relu=False, device=device, generator=g)
        c, d = len(config.context), config.dim
        # one linear map a contextual position, Xavier-normal and zero bias as the reference's
        std = math.sqrt(2.0 / (d + d))
        self.context_weight = nn.Parameter(torch.empty(c, d, d, device=device).normal_(0.0, std, generator=g))
        self.context_bias = nn.Parameter(torch.zeros(c, d, device=device))
        keys = self.embeddings.keys
        self._event = [keys.index(t.name) for t in config.event_tables]
        self._context = [keys.index(name) for name in config.context]

    def dense_parameters(self) -> Iterator[nn.Parameter]:
        """Every parameter but the embedding tables (the HSTU stack, the top MLP, the action
        embedding and the contextual maps): what a dense optimizer trains."""
        for name, p in self.named_parameters():
            if not name.startswith("embeddings."):
                yield p

    def batch_logits(self, batch: Any, timer: PhaseTimer = NULL_TIMER) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits, labels)``, both ``(L,)``, of every event of ``batch`` (a
        :class:`~recnotebooks.data.sequences.SequenceBatch` with this model's tables): what a
        trainer's loss and evaluation read."""
        tokens = batch.tokens(self.embeddings.keys)
        logits = self(tokens, batch.offsets, batch.previous_actions(), batch.timestamps, timer)
        return logits, batch.labels

    def forward(
        self,
        tokens: JaggedBatch,
        offsets: torch.Tensor,
        actions: torch.Tensor,
        timestamps: torch.Tensor | None = None,
        timer: PhaseTimer = NULL_TIMER,
    ) -> torch.Tensor:
        """Logits ``(L,)`` of the ``L`` events of the histories ``offsets`` delimits.

        ``tokens``: one id per event table per event and one per context table per non-empty
        history, in its first event's bag (``batch_size = L``, keys the table names, in order:
        :meth:`SequenceBatch.tokens`); ``actions``: ``(L,)`` indices into :data:`ACTIONS` of the
        event before each; ``timestamps``: ``(L,)`` seconds, or ``None``; ``timer`` records the
        phases ``embeddings``, ``hstu`` and ``top_mlp``."""
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
        with timer.phase("embeddings"):
            pooled = self.embeddings(tokens)  # (L, tables, dim)
            x = pooled[:, self._event].sum(dim=1) + self.actions(actions.to(self.actions.weight.device))
            if self._context:
                x, offsets, timestamps, events = self._with_context(pooled, x, offsets, timestamps)
        with timer.phase("hstu"):
            h = self.hstu(x, offsets, timestamps)
        with timer.phase("top_mlp"):
            if self._context:
                h = h[events]  # the events' outputs; the contextual tokens' are dropped
            return self.top(h).squeeze(-1)

    def _with_context(
        self, pooled: torch.Tensor, x: torch.Tensor, offsets: torch.Tensor, timestamps: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """The tokens with each non-empty history's ``C`` contextual tokens ahead of its events:
        ``(tokens, offsets, timestamps, events)``, ``events`` where the ``L`` events went."""
        c = len(self._context)
        lengths = offsets[1:] - offsets[:-1]
        firsts = offsets[:-1][lengths > 0]
        ctx = torch.baddbmm(  # (C, B', dim): context table k through its own map
            self.context_bias.unsqueeze(1).to(x.dtype),
            pooled[firsts][:, self._context].transpose(0, 1).to(x.dtype),
            self.context_weight.to(x.dtype),
        ).transpose(0, 1)  # (B', C, dim)
        grown = lengths + c * (lengths > 0)
        new_offsets = torch.cat([offsets[:1], grown.cumsum(0)])
        history = torch.repeat_interleave(torch.arange(len(lengths), device=x.device), lengths)
        events = torch.arange(len(x), device=x.device) - offsets[history] + new_offsets[history] + c
        slots = (new_offsets[:-1][lengths > 0][:, None] + torch.arange(c, device=x.device)).reshape(-1)
        out = x.new_empty(int(new_offsets[-1]), x.shape[1])
        out[events] = x
        out[slots] = ctx.reshape(-1, x.shape[1])
        if timestamps is not None:  # the contextual tokens at time 0, as the reference's
            times = timestamps.new_zeros(len(out))
            times[events] = timestamps
            timestamps = times
        return out, new_offsets, timestamps, events
