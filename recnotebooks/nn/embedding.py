"""Fused multi-table embedding bags: :class:`EmbeddingBagCollection`.

All tables live in **one** weight tensor (rows of table ``t`` start at ``row_offsets[t]``),
so the whole batch is pooled by a single ``embedding_bag`` call — the "table-batched"
embedding of FBGEMM/TorchRec, here in plain PyTorch. There is no Python loop over tables
on the hot path.

The fused row space, worked through for two tables of 4 and 3 rows (dim 2)::

    tables            user (4 rows)        ad (3 rows)
    row_offsets       0                    4
    weight rows       0  1  2  3           4  5  6        one (7, 2) tensor
                      └ user's rows ┘      └ ad's ┘

    batch (2 samples) user: [[3, 0], [1]]   ad: [[2], [0, 2]]
    values (local)    3 0 1                 2 0 2
    + row offset      +0                    +4
    ids (fused)       3 0 1                 6 4 6
    offsets           0 2 3 4 6             one bag per (table, sample), key-major

    embedding_bag(ids, weight, offsets) -> 4 pooled rows, reshaped to (batch=2, tables=2, dim=2):
        out[s, t] = sum of weight[ids of bag (t, s)]     e.g. out[1, 1] = weight[4] + weight[6]

One kernel call pools every bag of every table. The optimizer then sees fused ids: row 6 is
row 2 of ``ad``.

The rows live in the collection's ``rows`` store (:class:`~recnotebooks.nn.rows.RowStore`): every
row in ``weight`` (:class:`~recnotebooks.nn.rows.MemoryRows`), or the tables on the host and
``weight`` a device cache's slots (:mod:`recnotebooks.cache`); lookups read ``weight`` where it says.

Backward does not build a dense (or per-lookup sparse) weight gradient. It records the
gradient of the pooled outputs; :meth:`EmbeddingBagCollection.row_gradients` reduces it to
one gradient row per *distinct* looked-up row, which the sparse row-wise optimizers in
:mod:`recnotebooks.nn.optim` apply, touching only those rows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from recnotebooks.checks import check_choice, check_fits_memory, check_int, check_module_device, show
from recnotebooks.config import POOLINGS, TableConfig
from recnotebooks.kernels.allocator import advise_huge_pages
from recnotebooks.kernels.rows import shift_ids
from recnotebooks.nn.rows import MemoryRows, RowStore, group_by_row, segment_ids
from recnotebooks.sparse import JaggedBatch

__all__ = ["EmbeddingBagCollection", "LookupGroups", "PendingLookups", "RowGradients", "initial_rows"]

#: Rows drawn at a time by :func:`initial_rows` (bounds the temporary memory on huge tables).
INIT_CHUNK_ROWS = 1 << 22


def initial_rows(
    num_rows: Sequence[int], embedding_dim: int, seed: int | None = 0
) -> Iterator[tuple[int, torch.Tensor]]:
    """The initial fused weight of tables of ``num_rows`` rows, ``INIT_CHUNK_ROWS`` rows at a time:
    ``(first row, rows)`` pairs in order. Table ``t``'s rows are ``U(-1/sqrt(rows_t), 1/sqrt(rows_t))``
    as in the dlrm reference implementation, drawn from one generator seeded with ``seed`` (``None``:
    a random seed). :class:`EmbeddingBagCollection` copies every chunk in; a sharded collection keeps
    only its shards' blocks, never holding the whole weight."""
    gen = torch.Generator(device="cpu")
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    rows = torch.tensor([int(r) for r in num_rows], dtype=torch.int64)
    ends = torch.cumsum(rows, 0)
    total = int(ends[-1]) if rows.numel() else 0
    bounds = 1.0 / torch.sqrt(rows.double())
    for lo in range(0, total, INIT_CHUNK_ROWS):
        hi = min(lo + INIT_CHUNK_ROWS, total)
        table = torch.searchsorted(ends, torch.arange(lo, hi, dtype=torch.int64), right=True)
        u = torch.rand(hi - lo, embedding_dim, generator=gen, dtype=torch.float32)
        u.mul_(2).sub_(1).mul_(bounds.index_select(0, table)[:, None].float())
        yield lo, u


@dataclass
class _PendingGrad:
    ids: torch.Tensor  # global row ids, one per lookup
    offsets: torch.Tensor  # bag offsets (num_bags + 1), bags = tables x batch, key-major
    coef: torch.Tensor | None  # per-lookup multiplier (weights and/or 1/bag size)
    grad: torch.Tensor | None = None  # d loss / d pooled output, (num_bags, dim)
    node: Callable[[], object] | None = None  # weak reference to the autograd node
    tag: int | None = None  # the store's stamp of its lookup (a cache protects its rows until the step)

    def alive(self) -> bool:
        return self.node is None or self.node() is not None


@dataclass
class PendingLookups:
    """A step's lookups: ``ids`` (global rows) pooled into bags ``offsets`` (num_bags + 1),
    ``coef[k]`` the multiplier of lookup ``k`` (``None`` means 1), ``grad`` the gradient of
    the pooled outputs ``(num_bags, dim)``."""

    ids: torch.Tensor
    offsets: torch.Tensor
    coef: torch.Tensor | None
    grad: torch.Tensor


@dataclass
class LookupGroups:
    """A step's lookups grouped by row: lookups ``order[seg[i]:seg[i+1]]`` hit ``rows[i]``.

    ``bags[k]`` is the bag of lookup ``k``, ``coef[k]`` its multiplier (per-id weight and/or
    1/bag size; ``None`` means 1) and ``grad`` the gradient of the pooled outputs.
    """

    rows: torch.Tensor
    seg: torch.Tensor
    order: torch.Tensor
    bags: torch.Tensor
    coef: torch.Tensor | None
    grad: torch.Tensor


@dataclass
class RowGradients:
    """Gradient rows for the distinct rows touched since the last step.

    ``rows`` are global row ids (sorted, unique); ``grads[i]`` is the full gradient of the
    loss with respect to weight row ``rows[i]``.
    """

    rows: torch.Tensor
    grads: torch.Tensor


class _FusedBag(torch.autograd.Function):
    @staticmethod
    def forward(  # ctx: torch's context object, which this Function gives a `pending` attribute
        ctx: Any,
        weight: torch.Tensor,
        ids: torch.Tensor,
        offsets: torch.Tensor,
        psw: torch.Tensor | None,
        mode: str,
        pending: _PendingGrad,
    ) -> torch.Tensor:
        ctx.pending = pending
        pending.node = weakref.ref(ctx)  # ctx is the graph node: alive while a backward can come
        return F.embedding_bag(
            ids, weight, offsets, mode=mode, per_sample_weights=psw, include_last_offset=True
        )

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[None, None, None, None, None, None]:
        p = ctx.pending  # several backwards through one output add up, as autograd would
        p.grad = grad_out if p.grad is None else p.grad + grad_out
        return None, None, None, None, None, None


class EmbeddingBagCollection(nn.Module):
    """Many embedding tables pooled in one fused lookup.

    Args:
        tables: table configs (rows per table; names become the batch keys).
        embedding_dim: row width, shared by all tables.
        pooling: ``"sum"`` or ``"mean"``.
        device, dtype: where and how the weights are stored (``device``: ``None`` for torch's
            default, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; a device this machine lacks is refused).
        seed: initialisation seed; rows are ``U(-1/sqrt(rows), 1/sqrt(rows))`` as in the
            dlrm reference implementation.

    ``forward(batch)`` returns pooled embeddings of shape ``(batch_size, num_tables, dim)``.

    A weight larger than the memory ``device`` has available is refused with a ``ValueError``
    giving both in bytes, before anything is allocated (a terabyte table never reaches torch's
    allocator).
    """

    def __init__(
        self,
        tables: Sequence[TableConfig],
        embedding_dim: int,
        pooling: str = "sum",
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        seed: int | None = 0,
    ) -> None:
        super().__init__()
        tables = tuple(tables)
        if not tables or any(not isinstance(t, TableConfig) for t in tables):
            raise TypeError("tables must be a non-empty sequence of TableConfig")
        embedding_dim = check_int("embedding_dim", embedding_dim, lo=1)
        pooling = check_choice("pooling", pooling, POOLINGS)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating-point torch.dtype, got {show(dtype)}")
        device = check_module_device("device", device)
        total = sum(t.num_rows for t in tables)
        check_fits_memory(
            f"the embedding weight ({len(tables)} table(s), {total:,} rows x dim {embedding_dim}, {dtype})",
            total * embedding_dim * dtype.itemsize,
            device,
            hint="cap the rows (DLRMConfig.with_max_rows), lower embedding_dim, or keep the tables in host "
            "memory behind a device cache (recnotebooks.cache)",
        )
        self.tables = tables
        self.keys = tuple(t.name for t in tables)
        self.embedding_dim = embedding_dim
        self.pooling = pooling
        rows = torch.tensor([t.num_rows for t in tables], dtype=torch.int64)
        offs = torch.zeros(len(tables) + 1, dtype=torch.int64)
        torch.cumsum(rows, 0, out=offs[1:])
        self.total_rows = int(offs[-1])
        self.register_buffer("num_rows", rows.to(device), persistent=False)
        self.register_buffer("row_offsets", offs.to(device), persistent=False)
        weight = torch.empty(self.total_rows, embedding_dim, device=device, dtype=dtype)
        advise_huge_pages(weight)  # before the first touch, so the kernel can use 2 MiB pages
        self.weight = nn.Parameter(weight)
        self._min_rows = int(rows.min())
        #: where the rows live (:class:`~recnotebooks.nn.rows.RowStore`): here every row in ``weight``
        self.rows: RowStore = MemoryRows(self.weight, offs.tolist())
        self.reset_parameters(seed)
        self._pending: list[_PendingGrad] = []

    def _hold_rows(self, rows: RowStore) -> None:
        """Keep the rows in ``rows`` (e.g. a device cache's store): its ``weight`` is the collection's."""
        self.rows = rows
        self.weight = rows.weight
        dev = rows.weight.device
        self.num_rows, self.row_offsets = self.num_rows.to(dev), self.row_offsets.to(dev)

    def reset_parameters(self, seed: int | None = 0) -> None:
        """Uniform init per table, bound ``1/sqrt(rows)`` (:func:`initial_rows`); vectorised over tables."""
        self.rows.write_rows(initial_rows([t.num_rows for t in self.tables], self.embedding_dim, seed))

    def table_weight(self, key: str) -> torch.Tensor:
        """View of one table's rows."""
        return self.rows.table_weight(self.keys.index(key))

    # ----- lookup -------------------------------------------------------------------
    def _index_dtype_for(self, values: torch.Tensor) -> torch.dtype:
        return torch.int64 if values.dtype == torch.int64 or self.total_rows >= 2**31 else torch.int32

    def global_ids(self, batch: JaggedBatch, check: bool = True) -> torch.Tensor:
        """Batch ids shifted into the fused weight's row space, checked against table sizes."""
        if not isinstance(batch, JaggedBatch):
            raise TypeError(f"batch must be a JaggedBatch, got {type(batch).__name__}")
        if batch.keys != self.keys:
            raise ValueError(f"batch.keys must equal the tables {list(self.keys)}, got {list(batch.keys)}")
        dev = self.weight.device
        vals = batch.values.to(device=dev)
        vals = vals.to(self._index_dtype_for(vals))
        n = vals.numel()
        if n == 0:
            return vals
        key_offsets = batch.offsets()[:: batch.batch_size].to(dev)  # where each table's ids start
        shifted, bad = shift_ids(vals, key_offsets, self.num_rows, self.row_offsets, check)
        if shifted is not None and bad < 0:
            return shifted
        table = segment_ids(key_offsets, n)
        if check:
            lo, hi = torch.aminmax(vals)
            if int(lo) < 0 or int(hi) >= self._min_rows:
                bad = (vals < 0) | (vals >= self.num_rows.index_select(0, table))
                if bool(bad.any()):
                    i = int(torch.nonzero(bad)[0])
                    k = int(table[i])
                    raise ValueError(
                        f"id {int(vals[i])} out of range for table {self.keys[k]!r} "
                        f"(num_rows={int(self.num_rows[k])}, allowed 0..{int(self.num_rows[k]) - 1}); "
                        f"first bad id at values[{i}]"
                    )
        return vals + self.row_offsets.index_select(0, table).to(vals.dtype)

    def lookup_ids(self, batch: JaggedBatch) -> torch.Tensor:
        """Indices into ``weight`` of the batch's ids, from :attr:`rows` (global rows in memory, a
        cache's slots); the pending gradients and the optimizers use these indices."""
        recording = torch.is_grad_enabled() and self.weight.requires_grad
        waiting = [p.tag for p in self._pending if p.tag is not None and (p.grad is not None or p.alive())]
        return self.rows.lookup(self.global_ids(batch), batch, recording, waiting)

    def new_row_state(
        self, name: str, fill: float, dtype: torch.dtype = torch.float32, width: int | None = None
    ) -> torch.Tensor:
        """A per-row optimizer state over the rows of ``weight`` (the store's ``new_row_state``)."""
        return self.rows.new_row_state(name, fill, dtype, width)

    def forward(self, batch: JaggedBatch) -> torch.Tensor:
        ids = self.lookup_ids(batch)  # rows of `weight` (a cache's slots)
        offsets = batch.offsets().to(device=self.weight.device, dtype=ids.dtype)
        mode = self.pooling
        psw = None
        coef = None
        if batch.weights is not None:
            psw = batch.weights.to(device=self.weight.device, dtype=self.weight.dtype)
            if mode == "mean":  # embedding_bag supports weights only with sum pooling
                psw = psw / self._bag_sizes(offsets, ids.numel())
            mode = "sum"
            coef = psw
        elif mode == "mean":
            coef = 1.0 / self._bag_sizes(offsets, ids.numel())
        if torch.is_grad_enabled() and self.weight.requires_grad:
            # forget forwards whose graph died without a backward (e.g. a notebook cell that
            # called the model outside no_grad), so they cannot pile up
            self._pending = [p for p in self._pending if p.grad is not None or p.alive()]
            pending = _PendingGrad(ids, offsets, coef, tag=self.rows.stamp)
            out = _FusedBag.apply(self.weight, ids, offsets, psw, mode, pending)
            self._pending.append(pending)
        else:
            out = F.embedding_bag(
                ids, self.weight, offsets, mode=mode, per_sample_weights=psw, include_last_offset=True
            )
        if self.rows.stamp is None:  # no step to come for these rows: a cache frees its staging slots
            self.rows.forward_done()
        return out.view(self.num_tables, batch.batch_size, self.embedding_dim).transpose(0, 1)

    def _bag_sizes(self, offsets: torch.Tensor, n: int) -> torch.Tensor:
        """Size of the bag of each lookup (as the weight dtype)."""
        sizes = (offsets[1:] - offsets[:-1]).to(self.weight.dtype)
        return sizes.index_select(0, segment_ids(offsets, n))

    @property
    def num_tables(self) -> int:
        return len(self.tables)

    # ----- sparse gradients -----------------------------------------------------------
    def has_pending_gradients(self) -> bool:
        return any(p.grad is not None for p in self._pending)

    def clear_gradients(self) -> None:
        """Drop recorded gradients (the sparse counterpart of ``zero_grad``); the step has ended."""
        self._pending.clear()
        self.rows.step_done()

    def pending_lookups(self) -> PendingLookups | None:
        """The step's lookups and pooled gradient (``None`` if no gradient was recorded).

        Forwards whose output got no gradient are ignored; several forwards before a step
        (gradient accumulation) are concatenated, their bags numbered one after another.
        """
        done = [p for p in self._pending if p.grad is not None]
        if not done:
            return None
        if len(done) == 1:
            p = done[0]
            return PendingLookups(p.ids, p.offsets, p.coef, p.grad.contiguous())  # type: ignore[union-attr]
        dev, dt = self.weight.device, self.weight.dtype
        ids = torch.cat([p.ids.to(torch.int64) for p in done])
        offsets, shift = [torch.zeros(1, dtype=torch.int64, device=dev)], 0
        for p in done:  # each forward's bags follow the previous forward's
            offsets.append(p.offsets[1:].to(torch.int64) + shift)
            shift += p.ids.numel()
        grad = torch.cat([p.grad for p in done])  # type: ignore[misc]
        coef = None
        if any(p.coef is not None for p in done):
            ones = [torch.ones(p.ids.numel(), dtype=dt, device=dev) for p in done]
            coef = torch.cat([p.coef if p.coef is not None else o for p, o in zip(done, ones, strict=True)])
        return PendingLookups(ids, torch.cat(offsets), coef, grad.contiguous())

    def lookup_groups(self) -> LookupGroups | None:
        """The step's lookups grouped by row (``None`` if no gradient was recorded)."""
        p = self.pending_lookups()
        if p is None:
            return None
        bags = segment_ids(p.offsets, p.ids.numel())
        rows, counts, order = group_by_row(p.ids, bags)
        seg = torch.zeros(rows.numel() + 1, dtype=torch.int64, device=self.weight.device)
        torch.cumsum(counts, 0, out=seg[1:])
        return LookupGroups(rows.to(torch.int64), seg, order, bags, p.coef, p.grad)

    def row_gradients(self, groups: LookupGroups | None = None) -> RowGradients:
        """Reduce the recorded pooled-output gradients to one row per distinct touched row.

        Each distinct row's gradient is the (weighted) sum of the pooled gradients of the
        bags it appeared in: one segment-sum ``embedding_bag`` over the pooled gradient, with
        the lookups sorted by row (:meth:`lookup_groups`).
        """
        g = groups if groups is not None else self.lookup_groups()
        if g is None:
            dev, dt = self.weight.device, self.weight.dtype
            return RowGradients(
                torch.empty(0, dtype=torch.int64, device=dev),
                torch.empty(0, self.embedding_dim, dtype=dt, device=dev),
            )
        grads = F.embedding_bag(
            g.bags.index_select(0, g.order).to(torch.int64),
            g.grad,
            g.seg,
            mode="sum",
            per_sample_weights=None if g.coef is None else g.coef.index_select(0, g.order).to(g.grad.dtype),
            include_last_offset=True,
        )
        return RowGradients(g.rows, grads)

    def record_dense_gradient(self, grad: torch.Tensor) -> None:
        """Replace the pending gradient by a dense one: ``grad`` (``weight``'s shape), every row
        recorded as a lookup of its own, so the sparse optimizers update every row with its
        gradient row — what a data-parallel replica does with its all-reduced gradient. No
        lookup runs: the rows' gradients are the bags' gradients."""
        if not isinstance(self.rows, MemoryRows):
            raise TypeError(
                f"record_dense_gradient needs weight rows as lookup ids; {type(self).__name__} "
                "looks up other indices"
            )
        if not isinstance(grad, torch.Tensor) or grad.shape != self.weight.shape:
            got = tuple(grad.shape) if isinstance(grad, torch.Tensor) else type(grad).__name__
            raise ValueError(f"grad must be a tensor of weight's shape {tuple(self.weight.shape)}, got {got}")
        n, dev = self.weight.shape[0], self.weight.device
        pending = _PendingGrad(torch.arange(n, device=dev), torch.arange(n + 1, device=dev), None)
        pending.grad = grad.detach().to(device=dev, dtype=self.weight.dtype).contiguous()
        self.clear_gradients()
        self._pending.append(pending)

    def dense_weight_gradient(self) -> torch.Tensor:
        """The full dense gradient of ``weight`` (for tests and small tables only)."""
        rg = self.row_gradients()
        g = torch.zeros_like(self.weight, requires_grad=False)
        g.index_copy_(0, rg.rows, rg.grads)
        return g

    def extra_repr(self) -> str:
        store = self.rows.describe()
        return (
            f"tables={self.num_tables}, rows={self.total_rows}, dim={self.embedding_dim}, "
            f"pooling={self.pooling!r}" + (f", {store}" if store else "")
        )

    # ----- state dict and device moves: the row store's --------------------------------
    def _save_to_state_dict(self, destination: dict[str, Any], prefix: str, keep_vars: bool) -> None:
        self.rows.save_to_state_dict(self, destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        self._pending.clear()  # gradients of the rows before the load
        self.rows.load_from_state_dict(self, state_dict, prefix, *args)
        self.rows.weight = self.weight  # the parameter, also where a load assigned a new one

    def _apply(
        self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True
    ) -> EmbeddingBagCollection:
        super()._apply(fn, recurse)
        self.rows.weight = self.weight  # the parameter torch moved (or replaced)
        self.rows.move(fn)
        return self
