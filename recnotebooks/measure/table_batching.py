"""Table batching, measured here: one fused lookup over all tables vs a loop of per-table modules.

A DLRM has tens to thousands of embedding tables. Written the obvious way, a step runs a
Python loop over per-table ``torch.nn.EmbeddingBag`` modules: a forward, a backward and an
optimizer update launched *for every table*. The table-batched embedding of FBGEMM (and
our :class:`~recnotebooks.nn.EmbeddingBagCollection`) keeps all tables in one weight and
does each of those once for all of them. The fixed cost per launched operation is paid per
table by the loop and once by the fused lookup, so the fused lookup's advantage grows with
the number of tables.

:func:`measure_table_batching` times both on this machine over a list of table counts, on
the same batches and the same starting weights, for one **training step of the embedding
layer**: forward (pool every table), backward (the same upstream gradient on both sides)
and a sparse SGD update of the rows looked up. The loop gets its inputs already split per
table (its best case: splitting a batch by table is not timed). The two sides take turns,
and each row reports the fastest of several runs with their median and slowest.
:data:`PUBLISHED_SPEEDUPS` are TorchRec's GPU figures for the same comparison.

A sweep says when it cannot be read as a trend (:func:`table_batching_flags`), by the project's one
rule for measured numbers (:func:`recnotebooks.timing.reliability`: other programs kept busy more
cores than its thread left free, or its runs varied too much) and by one rule of its own: the
fixed cost per table and the work per lookup make each side's step a straight line in the
number of tables, so the speedup (their ratio) can only rise or only fall with it; a speedup
that steps back against the sweep's trend by more than :data:`DIP_TOLERANCE` is noise, not the
lookups.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from recnotebooks.checks import check_device, check_int, check_int_list
from recnotebooks.config import TableConfig
from recnotebooks.nn import EmbeddingBagCollection, SparseSGD
from recnotebooks.sparse import JaggedBatch
from recnotebooks.text import wrap_paragraph
from recnotebooks.threads import choose_threads, load_monitor, use_threads
from recnotebooks.timing import reliability, spread

__all__ = [
    "FUSED",
    "LOOP",
    "NOTEBOOK_TABLES",
    "PUBLISHED_SOURCE",
    "PUBLISHED_SPEEDUPS",
    "measure_table_batching",
    "published_speedups",
    "speedups",
    "table_batching_flags",
    "table_batching_summary",
    "table_batching_takeaway",
]

FUSED = "fused table-batched lookup (ours)"
LOOP = "loop of torch.nn.EmbeddingBag"
#: The table counts notebook 01 measures.
NOTEBOOK_TABLES = (1, 2, 5, 10, 20, 50, 100)
#: What one timed step does, on both sides.
WHAT = "forward + backward + sparse SGD update"

PUBLISHED_SOURCE = (
    "TorchRec, benchmarks/README.md, 'Comparison between EBC and fused_EBC on different sized embedding "
    "tables' (github.com/pytorch/torchrec/blob/main/benchmarks/README.md): training time of "
    "EmbeddingBagCollection (a loop of torch.nn.EmbeddingBag) over FusedEmbeddingBagCollection "
    "(FBGEMM table-batched kernels, fused SGD), one 16 GB V100; typical values of its grid over "
    "dims 4-128 and 4-8192 rows per table (2.7-5.9x at 10 tables, 8.4-11.9x at 100, 12.3-13.8x at 1000)"
)
#: TorchRec's published speedup of the fused (table-batched) module over the loop, on GPU.
PUBLISHED_SPEEDUPS: dict[int, float] = {10: 3.0, 100: 10.2, 1000: 13.1}
#: A measured speedup that steps back against the sweep's trend by more than this share (10%)
#: between two table counts makes the sweep non-monotonic: the fastest of several runs varies by a
#: few percent on a quiet machine, so a larger step back is other work on the machine.
DIP_TOLERANCE = 0.10


@dataclass
class _Pair:
    """Both implementations of one embedding layer, with equal weights and shared inputs."""

    fused: EmbeddingBagCollection
    fused_opt: SparseSGD
    loop: nn.ModuleList
    loop_opt: torch.optim.SGD
    batches: list[JaggedBatch]
    per_table: list[list[tuple[torch.Tensor, torch.Tensor]]]  # batch -> table -> (ids, offsets)
    grad: torch.Tensor  # the upstream gradient, (batch, tables, dim)


def _batch(num_tables: int, batch_size: int, pooling: int, rows: int, gen: torch.Generator) -> JaggedBatch:
    n = num_tables * batch_size * pooling
    return JaggedBatch(
        keys=tuple(f"t{i}" for i in range(num_tables)),
        values=torch.randint(0, rows, (n,), generator=gen),
        lengths=torch.full((num_tables * batch_size,), pooling, dtype=torch.int64),
        batch_size=batch_size,
    )


def _split(batch: JaggedBatch, device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each table's ids and bag offsets (``batch_size + 1`` of them), as the loop takes them."""
    out = []
    for key in batch.keys:
        ids, lengths = batch[key]
        offsets = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=offsets[1:])
        out.append((ids.to(device), offsets.to(device)))
    return out


def build_pair(
    num_tables: int,
    *,
    batch_size: int,
    pooling: int,
    embedding_dim: int,
    rows_per_table: int,
    device: torch.device,
    seed: int = 0,
    lr: float = 0.01,
    batches: int = 2,
) -> _Pair:
    """The fused collection and the per-table loop, with the same weights, batches and gradient."""
    tables = [TableConfig(f"t{i}", rows_per_table) for i in range(num_tables)]
    fused = EmbeddingBagCollection(tables, embedding_dim, device=device, seed=seed)
    loop = nn.ModuleList(
        nn.EmbeddingBag(rows_per_table, embedding_dim, mode="sum", sparse=True, include_last_offset=True)
        for _ in range(num_tables)
    ).to(device)
    with torch.no_grad():
        for key, module in zip(fused.keys, loop, strict=True):
            module.weight.copy_(fused.table_weight(key))
    gen = torch.Generator().manual_seed(seed)
    data = [_batch(num_tables, batch_size, pooling, rows_per_table, gen) for _ in range(batches)]
    grad = torch.randn(batch_size, num_tables, embedding_dim, generator=gen).to(device)
    return _Pair(
        fused,
        SparseSGD(fused, lr),
        loop,
        torch.optim.SGD(loop.parameters(), lr=lr),
        [b.to(device) for b in data],
        [_split(b, device) for b in data],
        grad,
    )


def fused_step(pair: _Pair, i: int) -> torch.Tensor:
    """One training step of the fused collection on batch ``i``; returns the pooled output."""
    pooled = pair.fused(pair.batches[i])
    pooled.backward(pair.grad)
    pair.fused_opt.step()
    return pooled


def loop_step(pair: _Pair, i: int) -> torch.Tensor:
    """One training step of the per-table loop on batch ``i``; returns the pooled output."""
    inputs = zip(pair.loop, pair.per_table[i], strict=True)
    pooled = torch.stack([module(ids, offsets) for module, (ids, offsets) in inputs], dim=1)
    pair.loop_opt.zero_grad(set_to_none=True)
    pooled.backward(pair.grad)
    pair.loop_opt.step()
    return pooled


def _seconds_per_step(step: Callable[[_Pair, int], torch.Tensor], pair: _Pair, steps: int) -> float:
    sync = torch.cuda.synchronize if pair.grad.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for s in range(steps):
        step(pair, s % len(pair.batches))
    sync()
    return (time.perf_counter() - t0) / steps


def _device(device: object) -> torch.device:
    return check_device("device", device)


def measure_table_batching(
    num_tables: Sequence[int] = NOTEBOOK_TABLES,
    *,
    batch_size: int = 512,
    pooling: int = 1,
    embedding_dim: int = 16,
    rows_per_table: int = 1000,
    repeats: int = 9,
    steps: int = 3,
    device: str = "cpu",
    seed: int = 0,
    threads: int | None = 1,
) -> list[dict[str, object]]:
    """Seconds per embedding-layer training step, fused vs a per-table loop, measured here.

    Returns tidy rows ``{num_tables, implementation, seconds_per_step, median_s, max_s,
    repeats, speedup, source="measured", device, threads, what}``, one per table count and
    implementation. Each side runs ``repeats`` times ``steps`` timed steps (after one
    untimed step), the two sides taking turns; ``seconds_per_step`` is the fastest run (on
    a shared machine other processes only ever *add* time, so the fastest run is the least
    disturbed), ``median_s`` and ``max_s`` show the spread. ``speedup`` (on the loop's
    rows) is the loop's ``seconds_per_step`` over the fused one's. ``other_load`` (cores other
    programs kept busy while the table count was measured; ``None``: unknown, or too short to
    tell), ``reliable`` and ``reliability`` apply :func:`recnotebooks.timing.reliability` to its
    runs (:func:`table_batching_flags` reads them). ``threads``: CPU threads
    (default one: both sides are bound by per-operation costs, and on a busy machine a
    step split over threads waits for its slowest thread, which makes timings erratic;
    ``None``: the thread policy's, :func:`recnotebooks.threads.choose_threads`). See the
    module docstring for what a step does.
    """
    counts = check_int_list("num_tables", num_tables, lo=1, hi=2000, min_len=1, max_len=20)
    b = check_int("batch_size", batch_size, lo=1, hi=65536)
    p = check_int("pooling", pooling, lo=1, hi=256)
    d = check_int("embedding_dim", embedding_dim, lo=1, hi=1024)
    r = check_int("rows_per_table", rows_per_table, lo=1, hi=10**6)
    lookups = max(counts) * b * p
    if lookups > 2 * 10**7 or max(counts) * r * d > 2.5 * 10**8:
        raise ValueError(
            f"num_tables={max(counts)} x batch_size={b} x pooling={p} (and x rows_per_table={r} "
            f"x embedding_dim={d}) is too large to measure in seconds here; use fewer or "
            "smaller tables, a smaller batch or less pooling"
        )
    reps = check_int("repeats", repeats, lo=1, hi=50)
    n = check_int("steps", steps, lo=1, hi=1000)
    dev = _device(device)
    choice = choose_threads(threads)
    with use_threads(choice.threads) as used:
        spare = float(max(0, choice.cores - used))
        return [row for t in counts for row in _measure_pair(t, b, p, d, r, reps, n, dev, seed, spare)]


def _measure_pair(
    t: int, b: int, p: int, d: int, r: int, reps: int, n: int, dev: torch.device, seed: int, spare: float
) -> list[dict[str, object]]:
    """The two rows of one table count (see :func:`measure_table_batching`); ``spare``: the cores
    its thread(s) left free."""
    pair = build_pair(t, batch_size=b, pooling=p, embedding_dim=d, rows_per_table=r, device=dev, seed=seed)
    fused_step(pair, 0), loop_step(pair, 0)  # untimed: allocator, kernel selection, JIT
    times: dict[str, list[float]] = {FUSED: [], LOOP: []}
    load_monitor().mark()
    for k in range(reps):  # alternate the order so neither side always runs second
        order = ((FUSED, fused_step), (LOOP, loop_step))
        for name, step in order if k % 2 == 0 else order[::-1]:
            times[name].append(_seconds_per_step(step, pair, n))
    other = load_monitor().since_mark().others
    speedup = min(times[LOOP]) / min(times[FUSED])
    why = reliability(reps, max(spread(ts) for ts in times.values()), other, spare)
    return [
        {
            "num_tables": t,
            "implementation": name,
            "seconds_per_step": min(ts),
            "median_s": statistics.median(ts),
            "max_s": max(ts),
            "repeats": reps,
            "speedup": speedup if name == LOOP else 1.0,
            "source": "measured",
            "device": str(dev),
            "threads": torch.get_num_threads(),
            "what": WHAT,
            "other_load": other,
            "reliable": not why,
            "reliability": why,
        }
        for name, ts in times.items()
    ]


def speedups(rows: Sequence[dict[str, object]]) -> list[dict[str, object]]:
    """Per table count, how many times faster the fused lookup ran than the loop (measured rows in)."""
    by = {(x["num_tables"], x["implementation"]): x for x in rows}
    counts = sorted({int(x["num_tables"]) for x in rows})  # type: ignore[call-overload]
    return [
        {
            "num_tables": t,
            "speedup": float(by[t, LOOP]["speedup"]),  # type: ignore[arg-type]
            "where": f"measured here ({by[t, LOOP]['device']})",
            "source": "measured",
        }
        for t in counts
    ]


def published_speedups() -> list[dict[str, object]]:
    """TorchRec's GPU speedups of table batching (:data:`PUBLISHED_SPEEDUPS`), as tidy rows."""
    where = "published: TorchRec, one V100 GPU"
    return [
        {"num_tables": t, "speedup": s, "where": where, "source": "published", "cite": PUBLISHED_SOURCE}
        for t, s in PUBLISHED_SPEEDUPS.items()
    ]


def _dips(ratio: dict[int, float], tolerance: float) -> list[tuple[int, int]]:
    """Pairs of successive table counts ``(a, b)`` where the speedup stepped back against the
    sweep's trend (its direction from the smallest count to the largest) by more than
    ``tolerance``."""
    counts = sorted(ratio)
    rising = ratio[counts[-1]] >= ratio[counts[0]]
    return [
        (a, b)
        for a, b in zip(counts, counts[1:], strict=False)
        if (ratio[b] < ratio[a] * (1 - tolerance) if rising else ratio[b] > ratio[a] * (1 + tolerance))
    ]


def table_batching_flags(rows: Sequence[dict[str, object]], tolerance: float = DIP_TOLERANCE) -> list[str]:
    """Why a sweep of :func:`measure_table_batching` cannot be read as a trend, in words (``[]``:
    it can): each table count whose runs were unreliable (:func:`recnotebooks.timing.reliability`:
    other programs busy on the cores its thread needed, runs that varied too much), and each step
    of the speedup back against the sweep's trend by more than ``tolerance`` (non-monotonic; see
    the module docstring). Rows without a verdict (made by hand) count as reliable."""
    flags = [
        f"at {x['num_tables']} table{'s' if x['num_tables'] != 1 else ''}: {x['reliability']}"
        for x in sorted(rows, key=lambda x: int(x["num_tables"]))  # type: ignore[call-overload]
        if x.get("implementation") == LOOP and x.get("reliable") is False
    ]
    ratio = {int(x["num_tables"]): float(x["speedup"]) for x in speedups(rows)}  # type: ignore[call-overload,arg-type]
    flags += [
        f"the speedup went from {ratio[a]:.2f}x at {a} tables to {ratio[b]:.2f}x at {b}, against the "
        f"trend by more than {tolerance:.0%}: a fixed cost per table cannot do that, other work on the "
        "machine can"
        for a, b in _dips(ratio, tolerance)
    ]
    return flags


def table_batching_summary(rows: Sequence[dict[str, object]]) -> dict[str, object]:
    """The numbers a take-away may quote, from :func:`measure_table_batching`'s rows.

    ``faster_from``: the smallest table count from which the fused lookup was faster at
    every larger count measured (``None`` if it was not faster at the largest);
    ``speedup``: table count -> measured speedup; ``loop_growth``/``fused_growth``: how many
    times longer a step took at the largest table count than at the smallest; ``monotonic``:
    whether the speedup kept its trend at every step (within :data:`DIP_TOLERANCE`);
    ``flags``: :func:`table_batching_flags` (``[]``: the sweep can be read as a trend).
    """
    ratio = {int(x["num_tables"]): float(x["speedup"]) for x in speedups(rows)}  # type: ignore[call-overload,arg-type]
    counts = sorted(ratio)
    faster_from = None
    for t in reversed(counts):
        if ratio[t] <= 1.0:
            break
        faster_from = t
    sec = {(x["num_tables"], x["implementation"]): float(x["seconds_per_step"]) for x in rows}  # type: ignore[arg-type]
    lo, hi = counts[0], counts[-1]
    return {
        "faster_from": faster_from,
        "speedup": ratio,
        "smallest": lo,
        "largest": hi,
        "loop_growth": sec[hi, LOOP] / sec[lo, LOOP],
        "fused_growth": sec[hi, FUSED] / sec[lo, FUSED],
        "monotonic": not _dips(ratio, DIP_TOLERANCE),
        "flags": table_batching_flags(rows),
    }


def table_batching_takeaway(summary: dict[str, object]) -> str:
    """The measured numbers behind notebook 01's sentence, in words (from :func:`table_batching_summary`)."""
    lo, hi = summary["smallest"], summary["largest"]
    ratio = summary["speedup"][hi]  # type: ignore[index]
    since = summary["faster_from"]
    where = (
        f"faster at every count measured from {since} tables on"
        if since is not None
        else f"not faster at {hi} tables here"
    )
    loop, fused = summary["loop_growth"], summary["fused_growth"]
    text = (
        f"Measured here: from {lo} to {hi} tables the loop's step grew {loop:.0f}x and the fused step "
        f"{fused:.1f}x; at {hi} tables the fused lookup ran {ratio:.1f}x as fast as the loop "
        f"({where})."
    )
    flags: list[str] = summary.get("flags") or []  # type: ignore[assignment]
    paragraphs = [text]
    if flags:
        why = "; ".join(flags)
        paragraphs.append(f"⚠ NOT RELIABLE as a trend (close other programs, run the cell again): {why}.")
    return wrap_paragraph("\n".join(paragraphs))
