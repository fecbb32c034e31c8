"""Autograd-aware collectives over ``torch.distributed`` that log what they move.

Four collectives, the ones a hybrid-parallel DLRM step needs:

* :func:`all_to_all` — uneven splits along dim 0 (pooled embeddings model-parallel ->
  data-parallel and back, the ids' input distribution); backward is the reverse all-to-all.
* :func:`reduce_scatter` — sum over ranks, each rank keeps its chunk (row-wise shards' partial
  sums); backward is an all-gather.
* :func:`all_gather` — every rank's chunk, concatenated; backward is a reduce-scatter.
* :func:`all_reduce` — sum (or mean) over ranks; backward is an all-reduce of the gradients.

Gradients follow the usual convention of distributed training: the loss being differentiated
is the sum of every rank's loss. Each call takes ``async_op=True`` to return a
:class:`CommHandle` at once (the collective runs while the caller computes); ``handle.wait()``
returns the tensor, which is then part of the autograd graph exactly as the synchronous
result is. The code is the same on gloo (CPU tensors) and NCCL (CUDA tensors).

Every call may record into a :class:`CommLog`: calls, bytes sent, bytes received and seconds
per collective, direction (forward / backward) and cost-model component. Bytes are exact
(element counts x element size) and count only traffic to or from **other** ranks:

* all-to-all: the rows of ``x`` sent to other ranks (``sum(in_splits) - in_splits[rank]``)
  and the rows received from them; the chunk a rank keeps for itself is not counted.
* reduce-scatter of ``W`` chunks of ``c`` elements: ``(W - 1) c`` sent and received.
* all-gather of a ``c``-element chunk: ``(W - 1) c`` sent (one copy to each other rank) and
  received.
* all-reduce of ``n`` elements, counted as a reduce-scatter followed by an all-gather over
  ``W`` element chunks (``c_r = n // W``, plus one for the first ``n % W`` ranks): rank ``r``
  sends ``(n - c_r) + (W - 1) c_r`` elements and receives as many; with ``n`` divisible by
  ``W`` that is ``2 (W - 1) / W`` of the buffer, the ring formula of the cost model.

``seconds`` is the time the calling process is blocked by the collective: issuing it plus
waiting for it (so an overlapped async call shows only its exposed time). On CUDA, a logged
collective synchronises the current stream when it is waited for, so its seconds are real.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.distributed as dist

from ..checks import check_bool, check_choice, check_int_list, check_type, show

__all__ = ["COMPONENTS", "CommHandle", "CommLog", "CommRecord", "all_gather", "all_reduce", "all_to_all",
           "reduce_scatter"]  # fmt: skip

#: The cost model's communication components a collective may be charged to (as in
#: ``perf.cost.COMPONENTS``; ``dist`` never imports the cost model).
COMPONENTS = ("all_to_all", "all_reduce")
_DIRECTIONS = ("forward", "backward")


@dataclass
class CommRecord:
    """What one kind of collective moved on one rank: totals over its calls."""

    collective: str
    component: str
    direction: str
    calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    seconds: float = 0.0


@dataclass
class CommLog:
    """A per-rank log of collectives: one :class:`CommRecord` per (collective, component, direction).

    Picklable, so the launcher returns each rank's log to the parent process.
    """

    rank: int = 0
    records: dict[tuple[str, str, str], CommRecord] = field(default_factory=dict)

    def record(
        self, collective: str, component: str, direction: str, sent: int, received: int, seconds: float
    ) -> None:
        """Add one call of ``collective`` that sent and received these bytes in ``seconds``."""
        key = (collective, component, direction)
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = CommRecord(collective, component, direction)
        rec.calls += 1
        rec.bytes_sent += int(sent)
        rec.bytes_received += int(received)
        rec.seconds += float(seconds)

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows, one per record: source ``"measured"``, rank, component, collective, direction,
        calls, bytes_sent, bytes_received, seconds (sorted by component, collective, direction)."""
        out = []
        for key in sorted(self.records, key=lambda k: (k[1], k[0], _DIRECTIONS.index(k[2]))):
            r = self.records[key]
            out.append(
                {
                    "source": "measured",
                    "rank": self.rank,
                    "component": r.component,
                    "collective": r.collective,
                    "direction": r.direction,
                    "calls": r.calls,
                    "bytes_sent": r.bytes_sent,
                    "bytes_received": r.bytes_received,
                    "seconds": r.seconds,
                }
            )
        return out

    def total(self, what: str = "bytes_sent", component: str | None = None) -> float:
        """The sum of one column (``calls``, ``bytes_sent``, ``bytes_received``, ``seconds``),
        over every record or those of one component."""
        check_choice("what", what, ("calls", "bytes_sent", "bytes_received", "seconds"))
        return sum(getattr(r, what) for r in self.records.values() if component in (None, r.component))

    def clear(self) -> None:
        """Forget every record (e.g. after warm-up steps)."""
        self.records.clear()

    def snapshot(self) -> CommLog:
        """A copy of the log as it is now (for :meth:`since`)."""
        return CommLog(self.rank, {k: replace(r) for k, r in self.records.items()})

    def since(self, earlier: CommLog) -> CommLog:
        """What was recorded after ``earlier`` (a :meth:`snapshot` of this log): e.g. the timed
        steps only, when the snapshot was taken after the warm-up steps."""
        check_type("earlier", earlier, CommLog, "a CommLog")
        out = CommLog(self.rank)
        for key, r in self.records.items():
            e = earlier.records.get(key) or CommRecord(r.collective, r.component, r.direction)
            if r.calls > e.calls:
                out.records[key] = CommRecord(
                    r.collective,
                    r.component,
                    r.direction,
                    r.calls - e.calls,
                    r.bytes_sent - e.bytes_sent,
                    r.bytes_received - e.bytes_received,
                    r.seconds - e.seconds,
                )
        return out


# ----- the collectives, as (spec -> start) pairs shared by forward, backward, sync and async -----
@dataclass(frozen=True)
class _Spec:
    kind: str  # all_to_all | reduce_scatter | all_gather | all_reduce
    group: Any
    component: str
    log: CommLog | None
    in_splits: tuple[int, ...] = ()
    out_splits: tuple[int, ...] = ()
    mean: bool = False

    def reverse(self) -> _Spec:
        """The collective that carries the gradients back."""
        kind = {"reduce_scatter": "all_gather", "all_gather": "reduce_scatter"}.get(self.kind, self.kind)
        return _Spec(kind, self.group, self.component, self.log, self.out_splits, self.in_splits, self.mean)


def _world_rank(group: Any) -> tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "recnotebooks.distributed.comm needs an initialised process group: run the function with "
            "recnotebooks.distributed.launch(...) or under torchrun (torch.distributed.init_process_group)"
        )
    return dist.get_world_size(group), dist.get_rank(group)


def _bytes(spec: _Spec, x: torch.Tensor, world: int, rank: int) -> tuple[int, int]:
    """Exact bytes (sent, received) to and from other ranks; see the module docstring."""
    size = x.element_size()
    if spec.kind == "all_to_all":
        row = x[0].numel() if x.dim() > 1 else 1
        sent = sum(spec.in_splits) - spec.in_splits[rank]
        received = sum(spec.out_splits) - spec.out_splits[rank]
        return sent * row * size, received * row * size
    if spec.kind == "reduce_scatter":
        chunk = x.numel() // world
        return (world - 1) * chunk * size, (world - 1) * chunk * size
    if spec.kind == "all_gather":
        return (world - 1) * x.numel() * size, (world - 1) * x.numel() * size
    n = x.numel()
    mine = n // world + (1 if rank < n % world else 0)
    both = (n - mine + (world - 1) * mine) * size
    return both, both


def _start(spec: _Spec, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """Issue the collective on ``x``: (output buffer, work handle)."""
    world, _ = _world_rank(spec.group)
    x = x.detach().contiguous()  # autograd is _Collective's business, not the backend's
    if spec.kind == "all_to_all":
        out = x.new_empty((sum(spec.out_splits), *x.shape[1:]))
        work = dist.all_to_all_single(
            out, x, list(spec.out_splits), list(spec.in_splits), group=spec.group, async_op=True
        )
    elif spec.kind == "reduce_scatter":
        out = x.new_empty((x.shape[0] // world, *x.shape[1:]))
        fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        work = fn(out, x, op=dist.ReduceOp.SUM, group=spec.group, async_op=True)
    elif spec.kind == "all_gather":
        out = x.new_empty((x.shape[0] * world, *x.shape[1:]))
        fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        work = fn(out, x, group=spec.group, async_op=True)
    else:
        out = x.clone()
        work = dist.all_reduce(out, op=dist.ReduceOp.SUM, group=spec.group, async_op=True)
    return out, work


class _Pending:
    """A started collective: its input (for the log), output buffer, work and time blocked so far."""

    def __init__(self, spec: _Spec, x: torch.Tensor, direction: str) -> None:
        self.spec, self.x, self.direction = spec, x, direction
        t0 = time.perf_counter()
        self.out, self.work = _start(spec, x)
        self.blocked = time.perf_counter() - t0

    def finish(self) -> torch.Tensor:
        t0 = time.perf_counter()
        self.work.wait()
        spec = self.spec
        if spec.log is not None and self.out.is_cuda:
            torch.cuda.current_stream(self.out.device).synchronize()
        out = self.out
        world, rank = _world_rank(spec.group)
        if spec.mean:
            out = out / world
        if spec.log is not None:
            sent, received = _bytes(spec, self.x, world, rank)
            seconds = self.blocked + time.perf_counter() - t0
            spec.log.record(spec.kind, spec.component, self.direction, sent, received, seconds)
        return out


class _Collective(torch.autograd.Function):
    """Links a finished collective's output to its input; backward runs the reverse collective."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, pending: _Pending) -> torch.Tensor:
        ctx.spec = pending.spec
        return pending.finish()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        back = _Pending(ctx.spec.reverse(), grad, "backward")
        return back.finish(), None


class CommHandle:
    """An issued asynchronous collective; :meth:`wait` returns its (autograd-connected) result."""

    def __init__(self, x: torch.Tensor, pending: _Pending) -> None:
        self._x, self._pending, self._result = x, pending, None

    def wait(self) -> torch.Tensor:
        """Block until the collective is done; the result (the same tensor on later calls)."""
        if self._result is None:
            self._result = _Collective.apply(self._x, self._pending)
            self._x = self._pending = None
        return self._result

    def is_completed(self) -> bool:
        """Whether :meth:`wait` has already returned (the collective may be done earlier)."""
        return self._result is not None


def _run(spec: _Spec, x: torch.Tensor, async_op: bool) -> torch.Tensor | CommHandle:
    handle = CommHandle(x, _Pending(spec, x, "forward"))
    return handle if async_op else handle.wait()


def _common(name: str, x: object, component: str, log: object, async_op: object) -> None:
    check_type(name, x, torch.Tensor, "a torch.Tensor")
    check_choice("component", component, COMPONENTS)
    if log is not None:
        check_type("log", log, CommLog, "a CommLog or None")
    check_bool("async_op", async_op)


def all_to_all(
    x: torch.Tensor,
    in_splits: Sequence[int] | None = None,
    out_splits: Sequence[int] | None = None,
    *,
    log: CommLog | None = None,
    group: Any = None,
    component: str = "all_to_all",
    async_op: bool = False,
) -> torch.Tensor | CommHandle:
    """Send ``x[sum(in_splits[:j]) : sum(in_splits[:j+1])]`` to rank ``j``; receive ``out_splits[j]``
    rows from rank ``j``, concatenated in rank order (splits along dim 0, zeros allowed).

    ``in_splits`` must sum to ``x.shape[0]``; ``out_splits[j]`` must equal what rank ``j`` sends
    here (the caller knows it from the plan). Either ``None`` means equal splits. Backward sends
    the gradients back with the splits swapped. Logged bytes count only rows exchanged with
    other ranks (the local chunk is not counted).
    """
    _common("x", x, component, log, async_op)
    world, rank = _world_rank(group)
    if x.dim() == 0:
        raise ValueError(
            f"x must have at least one dimension (split along dim 0), got shape {tuple(x.shape)}"
        )
    n = x.shape[0]
    if (in_splits is None or out_splits is None) and n % world:
        raise ValueError(f"x.shape[0] must be divisible by the world size {world} for equal splits, got {n}")
    ins = [n // world] * world if in_splits is None else check_int_list("in_splits", in_splits, lo=0)
    outs = [n // world] * world if out_splits is None else check_int_list("out_splits", out_splits, lo=0)
    for name, splits in (("in_splits", ins), ("out_splits", outs)):
        if len(splits) != world:
            raise ValueError(f"{name} must have one entry per rank ({world}), got {show(splits)}")
    if sum(ins) != n:
        raise ValueError(f"in_splits must sum to x.shape[0] = {n}, got {show(ins)} (sum {sum(ins)})")
    if outs[rank] != ins[rank]:
        raise ValueError(
            f"out_splits[{rank}] must equal in_splits[{rank}] (what rank {rank} keeps for itself), "
            f"got {outs[rank]} and {ins[rank]}"
        )
    return _run(_Spec("all_to_all", group, component, log, tuple(ins), tuple(outs)), x, async_op)


def reduce_scatter(
    x: torch.Tensor,
    *,
    log: CommLog | None = None,
    group: Any = None,
    component: str = "all_to_all",
    async_op: bool = False,
) -> torch.Tensor | CommHandle:
    """Sum ``x`` over ranks and keep chunk ``rank`` of ``world`` equal chunks along dim 0.

    ``component`` is the step the call serves: ``"all_to_all"`` (the default: row-wise shards'
    pooled partial sums, the output distribution) or ``"all_reduce"`` (gradient synchronisation).
    Backward is an all-gather of the gradients.
    """
    _common("x", x, component, log, async_op)
    world, _ = _world_rank(group)
    if x.dim() == 0 or x.shape[0] % world:
        raise ValueError(
            f"x.shape[0] must be divisible by the world size {world}, got shape {tuple(x.shape)}"
        )
    return _run(_Spec("reduce_scatter", group, component, log), x, async_op)


def all_gather(
    x: torch.Tensor,
    *,
    log: CommLog | None = None,
    group: Any = None,
    component: str = "all_to_all",
    async_op: bool = False,
) -> torch.Tensor | CommHandle:
    """Every rank's ``x`` (same shape on every rank), concatenated along dim 0 in rank order.

    ``component`` as in :func:`reduce_scatter`. Backward is a reduce-scatter of the gradients.
    """
    _common("x", x, component, log, async_op)
    _world_rank(group)
    if x.dim() == 0:
        raise ValueError(
            f"x must have at least one dimension (gathered along dim 0), got shape {tuple(x.shape)}"
        )
    return _run(_Spec("all_gather", group, component, log), x, async_op)


def all_reduce(
    x: torch.Tensor,
    op: str = "sum",
    *,
    log: CommLog | None = None,
    group: Any = None,
    component: str = "all_reduce",
    async_op: bool = False,
) -> torch.Tensor | CommHandle:
    """The sum (``op="sum"``) or mean (``op="mean"``) of ``x`` over ranks, as a new tensor.

    Backward all-reduces the gradients the same way (sum, or mean for ``"mean"``).
    """
    _common("x", x, component, log, async_op)
    check_choice("op", op, ("sum", "mean"))
    _world_rank(group)
    return _run(_Spec("all_reduce", group, component, log, mean=op == "mean"), x, async_op)
