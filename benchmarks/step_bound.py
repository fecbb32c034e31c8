"""A measured lower bound for one DLRM training step on this machine.

The bound is the work any implementation of the step must do, each piece timed alone here
(MEASURED, in the same process as the steps it is compared with):

* **GEMMs** at the step's own shapes: for every ``Linear`` its forward ``X W^T`` and both
  backward GEMMs ``dY W`` and ``dY^T X`` (the bottom MLP's first layer has no ``dY W``: the
  dense input needs no gradient), and for the dot interaction the batched ``X X^T`` and its
  backward ``(G + G^T) X``, and for DCN's cross layers each layer's two low-rank GEMMs (``V``:
  width -> rank, ``W``: rank -> width) with their three GEMMs each, with the operand layouts
  autograd uses.
* **Embedding rows looked up**: every lookup's row read and summed into its bag
  (``F.embedding_bag``, sum) on a scratch table of the step's size and dim, with the
  step's own ids, so hot rows hit the cache as they do in the step.
* **Distinct rows read and written by the optimizer**: ``w[r] -= v[r]`` for each distinct
  row of the step (sorted, in parallel; a Numba loop run on PyTorch's OpenMP threads, as
  our SGD kernel is, so that no spinning worker slows it), on the same scratch table.

The pieces run back to back as one "bound step" timed like a training step; each piece is
also timed alone for the breakdown.

Each embedding piece is also shown as the bandwidth it reached (bytes of rows moved per
second), the machine's random-row bandwidth for this access pattern. Everything else a
step does (bias adds, ReLU and its backward, bias gradients, the loss, concatenations, the
cross layers' elementwise products and residual sums, grouping lookups by row, reducing the
pooled gradient per row) counts as time above the bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
import torch
import torch.nn.functional as F
from numba import carray, cfunc, njit, prange, types

from recnotebooks.config import DLRMConfig
from recnotebooks.kernels.allocator import advise_huge_pages
from recnotebooks.kernels.omp import address, call_int, f32_ptr, i64_ptr, run_on_openmp, torch_openmp

__all__ = ["BoundProbe", "EmbeddingTraffic", "MLPAlone", "StepBound", "gemm_calls", "traffic_of"]


@njit(parallel=True, cache=True)
def _subtract_rows(table, rows, delta):  # pragma: no cover - compiled
    """``table[rows[i]] -= delta[i]`` for distinct rows: each row read and written once."""
    for i in prange(rows.shape[0]):
        r = rows[i]
        for d in range(table.shape[1]):
            table[r, d] -= delta[i, d]


@cfunc(types.void(types.voidptr), cache=True)
def _subtract_rows_omp(data):  # pragma: no cover - compiled
    """:func:`_subtract_rows` as one thread of PyTorch's OpenMP team (``recnotebooks.kernels.omp``,
    as our SGD kernel runs): thread ``t`` of ``n`` takes the ``t``-th of ``n`` equal runs."""
    a = carray(data, (8,), np.int64)
    table = carray(f32_ptr(a[0]), (a[1], a[2]))
    rows, delta = carray(i64_ptr(a[3]), (a[4],)), carray(f32_ptr(a[5]), (a[4], a[2]))
    tid, nt = call_int(a[6]), call_int(a[7])
    step = (a[4] + nt - 1) // nt
    for i in range(tid * step, min(a[4], (tid + 1) * step)):
        r = rows[i]
        for d in range(a[2]):
            table[r, d] -= delta[i, d]


def _fastest(fn: Callable[[], object], reps: int) -> float:
    """Seconds of the fastest of ``reps`` calls after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_calls(cfg: DLRMConfig, batch_size: int) -> list[tuple[str, Callable[[], torch.Tensor]]]:
    """The step's GEMMs as ``(label, call)`` pairs on random operands of the step's shapes."""
    b = batch_size
    calls: list[tuple[str, Callable[[], torch.Tensor]]] = []
    towers = (("bottom", cfg.num_dense, cfg.bottom_mlp), ("top", cfg.interaction_output_dim, cfg.top_mlp))
    for tower, fan_in, widths in towers:
        for i, out in enumerate(widths):
            x, w, dy = torch.randn(b, fan_in), torch.randn(out, fan_in), torch.randn(b, out)
            name = f"{tower}[{i}] {fan_in}->{out}"
            calls.append((f"{name} X W^T", lambda x=x, w=w: x @ w.t()))
            if tower == "top" or i > 0:
                calls.append((f"{name} dY W", lambda dy=dy, w=w: dy @ w))
            calls.append((f"{name} dY^T X", lambda dy=dy, x=x: dy.t() @ x))
            fan_in = out
    if cfg.interaction == "dot":
        f, d = cfg.num_interaction_features, cfg.embedding_dim
        x, g = torch.randn(b, f, d), torch.randn(b, f, f)
        calls.append((f"interaction X X^T ({f}x{d})", lambda x=x: torch.bmm(x, x.transpose(1, 2))))
        calls.append((f"interaction (G+G^T) X ({f}x{f})", lambda x=x, g=g: torch.bmm(g, x)))
    elif cfg.interaction == "dcn":  # each cross layer: V (width -> rank, no bias), then W (rank -> width)
        w, r = cfg.interaction_output_dim, cfg.dcn_rank
        for layer in range(cfg.dcn_layers):
            for name, fan_in, out in ((f"cross[{layer}] V", w, r), (f"cross[{layer}] W", r, w)):
                x, wt, dy = torch.randn(b, fan_in), torch.randn(out, fan_in), torch.randn(b, out)
                calls.append((f"{name} {fan_in}->{out} X W^T", lambda x=x, wt=wt: x @ wt.t()))
                calls.append((f"{name} {fan_in}->{out} dY W", lambda dy=dy, wt=wt: dy @ wt))
                calls.append((f"{name} {fan_in}->{out} dY^T X", lambda dy=dy, x=x: dy.t() @ x))
    return calls


class MLPAlone:
    """The step's two MLPs as PyTorch writes them (``nn.Sequential`` of ``Linear`` and
    in-place ``ReLU``), forward and backward with a ``BCEWithLogits`` loss and nothing else:
    no embeddings, the interaction's output a leaf tensor. It is what any PyTorch DLRM pays
    for its dense part (bias adds, ReLU and its backward, bias gradients, and the GEMMs with
    the operands a real step leaves in cache), so the step's time above it is the sparse
    part and the interaction."""

    def __init__(self, cfg: DLRMConfig, batch_size: int) -> None:
        def tower(layers: list[tuple[int, int]], final_relu: bool) -> torch.nn.Sequential:
            mods: list[torch.nn.Module] = []
            for i, (fan_in, out) in enumerate(layers):
                mods.append(torch.nn.Linear(fan_in, out))
                if i < len(layers) - 1 or final_relu:
                    mods.append(torch.nn.ReLU(inplace=True))
            return torch.nn.Sequential(*mods)

        self.bottom, self.top = tower(cfg.mlp_layers("bottom"), True), tower(cfg.mlp_layers("top"), False)
        self.dense = torch.randn(batch_size, cfg.num_dense)
        width = cfg.interaction_output_dim - cfg.bottom_mlp[-1]
        self.features = torch.randn(batch_size, width, requires_grad=True)  # the interaction's output
        self.labels = torch.randint(0, 2, (batch_size,)).float()
        self.params = [*self.bottom.parameters(), *self.top.parameters(), self.features]

    def run(self, i: int = 0) -> None:
        """One forward and backward of both MLPs."""
        x = self.bottom(self.dense)
        logits = self.top(torch.cat([x, self.features], dim=1)).squeeze(1)
        F.binary_cross_entropy_with_logits(logits, self.labels).backward()
        for p in self.params:
            p.grad = None


@dataclass
class EmbeddingTraffic:
    """One step's embedding work: its lookups (ids into bags) and its distinct rows."""

    ids: torch.Tensor  # global row ids, one per lookup
    offsets: torch.Tensor  # bag offsets, include_last_offset
    rows: torch.Tensor  # distinct rows, sorted (int64)

    @property
    def lookups(self) -> int:
        return int(self.ids.numel())

    @property
    def distinct_rows(self) -> int:
        return int(self.rows.numel())


@dataclass
class StepBound:
    """One measurement of the bound (seconds), with the row traffic it priced."""

    gemm_s: float
    lookup_s: float
    update_s: float
    lookups: int
    distinct_rows: int
    row_bytes: int

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.lookup_s + self.update_s

    @property
    def lookup_gbs(self) -> float:
        """Bandwidth of the lookup microbenchmark: row bytes read per second."""
        return self.lookups * self.row_bytes / self.lookup_s / 1e9

    @property
    def update_gbs(self) -> float:
        """Bandwidth of the update microbenchmark: row bytes read plus written per second."""
        return 2 * self.distinct_rows * self.row_bytes / self.update_s / 1e9


class BoundProbe:
    """The bound's pieces for one config, on the same batches as the steps.

    :meth:`run` does one bound "step": every GEMM once, then batch ``i``'s lookups and row
    updates, back to back, so it can be timed exactly like a training step (same loop,
    same clock, so machine noise inflates both alike). :meth:`parts` times each piece
    alone (fastest of a few calls) for the breakdown and the bandwidths.
    """

    def __init__(self, cfg: DLRMConfig, batch_size: int, traffic: list[EmbeddingTraffic]) -> None:
        self.gemms = gemm_calls(cfg, batch_size)
        total_rows = sum(t.num_rows for t in cfg.tables)
        table = torch.empty(total_rows, cfg.embedding_dim)
        advise_huge_pages(table)
        table.uniform_(-0.01, 0.01)  # touch every page, as a trained table is
        self.table = table
        self.traffic = traffic
        self.deltas = [torch.zeros(t.distinct_rows, cfg.embedding_dim) for t in traffic]
        self.row_bytes = cfg.embedding_dim * table.element_size()

    def _lookup(self, i: int) -> None:
        t = self.traffic[i % len(self.traffic)]
        F.embedding_bag(t.ids, self.table, t.offsets, mode="sum", include_last_offset=True)

    def _update(self, i: int) -> None:
        k = i % len(self.traffic)
        table, rows, delta = self.table.numpy(), self.traffic[k].rows.numpy(), self.deltas[k].numpy()
        rt = torch_openmp()
        if rt is None:
            numba.set_num_threads(min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
            _subtract_rows(table, rows, delta)
            return
        args = np.array([address(table), *table.shape, address(rows), rows.shape[0], address(delta),
                         rt.thread_num, rt.num_threads], np.int64)  # fmt: skip
        run_on_openmp(rt, _subtract_rows_omp.address, args, torch.get_num_threads())

    def run(self, i: int) -> None:
        """One bound step for batch ``i``."""
        for _, call in self.gemms:
            call()
        self._lookup(i)
        self._update(i)

    def parts(self, i: int, reps: int = 3) -> StepBound:
        """Each piece alone for batch ``i`` (fastest of ``reps`` calls after a warm-up)."""
        t = self.traffic[i % len(self.traffic)]
        gemm_s = sum(_fastest(call, reps) for _, call in self.gemms)
        lookup_s = _fastest(lambda: self._lookup(i), reps)
        update_s = _fastest(lambda: self._update(i), reps)
        return StepBound(gemm_s, lookup_s, update_s, t.lookups, t.distinct_rows, self.row_bytes)

    def gemm_table(self, reps: int = 3) -> list[tuple[str, float]]:
        """Each GEMM's fastest time (seconds), for a breakdown."""
        return [(label, _fastest(call, reps)) for label, call in self.gemms]


def traffic_of(ids: torch.Tensor, offsets: torch.Tensor) -> EmbeddingTraffic:
    """The traffic of one batch's lookups (global ids and bag offsets)."""
    rows = torch.from_numpy(np.unique(ids.numpy()).astype(np.int64))
    return EmbeddingTraffic(ids, offsets, rows)
