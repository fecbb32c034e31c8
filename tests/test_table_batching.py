"""Table batching measured here (notebook 01's finding (c)): fused lookup vs a per-table loop."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.measure.table_batching import (
    FUSED,
    LOOP,
    NOTEBOOK_TABLES,
    PUBLISHED_SPEEDUPS,
    build_pair,
    fused_step,
    loop_step,
    measure_table_batching,
    published_speedups,
    speedups,
    table_batching_summary,
)


@settings(max_examples=25, deadline=None)
@given(
    tables=st.integers(1, 5),
    batch=st.integers(1, 6),
    pooling=st.integers(1, 3),
    rows=st.integers(2, 30),
    dim=st.integers(1, 4),
)
def test_both_sides_do_the_same_work(tables: int, batch: int, pooling: int, rows: int, dim: int) -> None:
    """Same pooled output and same weights after the update: the loop (plain torch.nn.EmbeddingBag
    + torch.optim.SGD) is an independent reference for our fused collection + SparseSGD."""
    pair = build_pair(tables, batch_size=batch, pooling=pooling, embedding_dim=dim, rows_per_table=rows,
                      device=torch.device("cpu"), seed=tables + rows, lr=0.1)  # fmt: skip
    for i in range(2):  # two steps: the second starts from the first's updated rows
        fused, loop = fused_step(pair, i), loop_step(pair, i)
        torch.testing.assert_close(fused, loop, rtol=1e-5, atol=1e-6)
        for key, module in zip(pair.fused.keys, pair.loop, strict=True):
            torch.testing.assert_close(
                pair.fused.table_weight(key), module.weight.detach(), rtol=1e-5, atol=1e-6
            )


def test_the_update_moves_the_rows_looked_up() -> None:
    pair = build_pair(
        3, batch_size=4, pooling=2, embedding_dim=2, rows_per_table=50, device=torch.device("cpu")
    )
    before = pair.fused.weight.detach().clone()
    fused_step(pair, 0)
    assert not torch.equal(before, pair.fused.weight.detach())


@pytest.fixture(scope="module")
def measured() -> list[dict[str, object]]:
    """The notebook's measurement on fewer table counts, in one process."""
    return measure_table_batching((1, 10, 50), repeats=9, steps=2)


def test_rows_are_tidy_and_measured(measured: list[dict[str, object]]) -> None:
    assert [(r["num_tables"], r["implementation"]) for r in measured] == [
        (t, side) for t in (1, 10, 50) for side in (FUSED, LOOP)
    ]
    for r in measured:
        assert r["source"] == "measured" and r["device"] == "cpu" and r["threads"] == 1
        assert 0 < r["seconds_per_step"] <= r["median_s"] <= r["max_s"] and math.isfinite(r["max_s"])
    assert torch.get_num_threads() >= 1


def test_fused_beats_the_loop_as_tables_grow(measured: list[dict[str, object]]) -> None:
    """The finding notebook 01 states, asserted on the numbers the function returns: the loop's
    step grows with the tables far faster than the fused one's, and at 50 tables the fused
    lookup is faster (lenient margins: the machine may be shared; both sides ran in turns)."""
    summary = table_batching_summary(measured)
    assert summary["speedup"][50] > 1.2
    assert summary["faster_from"] is not None and summary["faster_from"] <= 50
    assert summary["loop_growth"] > 1.5 * summary["fused_growth"]  # i.e. the speedup rose 1.5x from 1 table
    assert summary["loop_growth"] > 5  # 50x the tables: the loop pays per table


def test_speedups_and_published_rows(measured: list[dict[str, object]]) -> None:
    rows = speedups(measured)
    by = {(r["num_tables"], r["implementation"]): r["seconds_per_step"] for r in measured}
    for r in rows:
        assert r["speedup"] == pytest.approx(by[r["num_tables"], LOOP] / by[r["num_tables"], FUSED])
        assert r["source"] == "measured"
    pub = published_speedups()
    assert {r["num_tables"]: r["speedup"] for r in pub} == PUBLISHED_SPEEDUPS
    assert all(
        r["source"] == "published" and "torchrec/blob/main/benchmarks/README.md" in r["cite"] for r in pub
    )
    assert PUBLISHED_SPEEDUPS[10] == pytest.approx(3, abs=0.3) and PUBLISHED_SPEEDUPS[100] == pytest.approx(
        10, abs=1
    )


def test_summary_on_hand_made_rows() -> None:
    def rows(fused: list[float], loop: list[float]) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for t, f, lo in zip((1, 10, 100), fused, loop, strict=True):
            c = {"num_tables": t, "device": "cpu"}
            out += [{**c, "implementation": FUSED, "seconds_per_step": f, "speedup": 1.0},
                    {**c, "implementation": LOOP, "seconds_per_step": lo, "speedup": lo / f}]  # fmt: skip
        return out

    s = table_batching_summary(rows([1.0, 1.0, 2.0], [0.5, 2.0, 20.0]))
    assert s["faster_from"] == 10 and s["loop_growth"] == 40 and s["fused_growth"] == 2
    assert table_batching_summary(rows([1.0, 1.0, 2.0], [0.5, 2.0, 1.0]))["faster_from"] is None
    assert table_batching_summary(rows([1.0, 1.0, 2.0], [2.0, 0.5, 4.0]))["faster_from"] == 100


def test_notebook_tables_cover_the_published_points() -> None:
    assert {10, 100} <= set(NOTEBOOK_TABLES) and tuple(sorted(NOTEBOOK_TABLES)) == NOTEBOOK_TABLES


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [({"num_tables": [0]}, ValueError, r"num_tables\[0\] must be"),
     ({"num_tables": 10}, TypeError, "num_tables must be a sequence"),
     ({"batch_size": 2.5}, TypeError, "batch_size must be an int"),
     ({"num_tables": [2000], "batch_size": 65536}, ValueError, "too large to measure"),
     ({"device": "tpu"}, ValueError, "device must be"),
     ({"threads": 0}, ValueError, "threads must be"),
     ({"repeats": True}, TypeError, "repeats must be")],
)  # fmt: skip
def test_bad_input_names_the_parameter(kw: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        measure_table_batching(**{"num_tables": [1], "repeats": 1, "steps": 1, **kw})


def test_takeaway_quotes_the_measured_numbers(measured: list[dict[str, object]]) -> None:
    from recnotebooks.measure.table_batching import table_batching_takeaway

    s = table_batching_summary(measured)
    text = " ".join(table_batching_takeaway(s).split())  # the printed lines break between words
    assert f"{s['speedup'][50]:.1f}x as fast" in text and f"grew {s['loop_growth']:.0f}x" in text
    assert text.startswith("Measured here") and "from 1 to 50 tables" in text
    none = table_batching_takeaway({**s, "faster_from": None})
    assert "not faster at 50 tables" in none


def test_the_chart_draws_measured_beside_published(measured: list[dict[str, object]]) -> None:
    from recnotebooks.viz.architecture import table_batching_chart
    from recnotebooks.viz.charts import chart_rows

    spec = table_batching_chart(measured).to_dict()  # schema-validated
    ratio, times = spec["vconcat"]
    assert {r["source"] for r in chart_rows(ratio)} == {"measured", "published"}
    assert {r["implementation"] for r in chart_rows(times)} == {FUSED, LOOP}
    assert all(c["width"] <= 520 for c in (ratio, times))


def test_a_fused_update_keeps_the_thread_count_it_was_given() -> None:
    """numba's first OpenMP launch in a process resets torch's intra-op threads; a measurement on
    one thread must stay on one thread (fresh process, so the launch really is the first)."""
    import subprocess
    import sys

    code = (
        "import torch; torch.set_num_threads(1)\n"
        "from recnotebooks.measure.table_batching import build_pair, fused_step\n"
        "p = build_pair(2, batch_size=8, pooling=1, embedding_dim=4, rows_per_table=10,\n"
        "               device=torch.device('cpu'))\n"
        "fused_step(p, 0); print(torch.get_num_threads())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == "1"


# ----- a sweep that cannot be read as a trend says so (issue 37: 01 §5 on a busy machine) -----------
def _sweep(speedup: dict[int, float], why: dict[int, str] | None = None) -> list[dict[str, object]]:
    """Hand-made rows of :func:`measure_table_batching`: the fused step 1 ms at every count, the loop's
    ``speedup`` times that; ``why``: the reliability verdict of a count (none: reliable)."""
    out: list[dict[str, object]] = []
    for t, ratio in speedup.items():
        verdict = (why or {}).get(t, "")
        c = {"num_tables": t, "device": "cpu", "reliable": not verdict, "reliability": verdict}
        fused = {**c, "implementation": FUSED, "seconds_per_step": 1e-3, "speedup": 1.0}
        out += [fused, {**fused, "implementation": LOOP, "seconds_per_step": ratio * 1e-3, "speedup": ratio}]
    return out


@pytest.mark.parametrize(
    ("speedup", "dips"),
    [({1: 0.8, 10: 1.5, 50: 3.0}, []),  # rising: a trend
     ({1: 3.0, 10: 2.0, 50: 1.2}, []),  # falling all the way is a trend too (a linear-fractional ratio)
     ({1: 0.8, 10: 1.5, 20: 1.4, 50: 3.0}, []),  # a 7% step back: within the tolerance
     ({1: 0.8, 10: 1.5, 20: 1.2, 50: 3.0}, [(10, 20)]),  # 20% back: non-monotonic
     ({1: 0.8, 2: 0.6, 10: 1.5, 20: 1.2, 50: 3.0}, [(1, 2), (10, 20)]),
     ({1: 3.0, 10: 1.0, 50: 1.5}, [(10, 50)])],  # falling, then up by 50%
)  # fmt: skip
def test_a_speedup_that_steps_back_is_flagged(speedup: dict[int, float], dips: list[tuple[int, int]]) -> None:
    from recnotebooks.measure.table_batching import (
        DIP_TOLERANCE,
        table_batching_flags,
        table_batching_takeaway,
    )

    assert DIP_TOLERANCE == 0.10
    rows = _sweep(speedup)
    flags = table_batching_flags(rows)
    assert len(flags) == len(dips)
    for (a, b), flag in zip(dips, flags, strict=True):
        assert f"from {speedup[a]:.2f}x at {a} tables to {speedup[b]:.2f}x at {b}" in flag
    summary = table_batching_summary(rows)
    assert summary["monotonic"] is not dips and summary["flags"] == flags
    text = table_batching_takeaway(summary)
    assert ("NOT RELIABLE" in text) is bool(dips)
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_count_measured_under_load_is_flagged() -> None:
    from recnotebooks.measure.table_batching import table_batching_flags, table_batching_takeaway

    busy = "other programs kept 1.8 cores busy while it ran, more than the 1 its threads left free"
    rows = _sweep({1: 0.8, 10: 1.5, 50: 3.0}, {10: busy})
    assert table_batching_flags(rows) == [f"at 10 tables: {busy}"]
    text = " ".join(table_batching_takeaway(table_batching_summary(rows)).split())
    assert "⚠ NOT RELIABLE as a trend" in text and f"at 10 tables: {busy}" in text


def test_the_sweep_measures_the_load_with_the_projects_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every core busy with other work while a count is measured: its rows say NOT reliable, by the
    one rule (recnotebooks.timing.reliability), though the sweep runs on a fixed single thread."""
    import recnotebooks.measure.table_batching as tb
    from recnotebooks.threads import CpuLoad, usable_cores

    class Busy:
        def mark(self) -> None: ...

        def since_mark(self) -> CpuLoad:
            return CpuLoad(usable_cores(), float(usable_cores()), 0.5)

    monkeypatch.setattr(tb, "load_monitor", lambda: Busy())
    rows = measure_table_batching((1, 2), repeats=1, steps=1)
    assert all(r["other_load"] == usable_cores() and not r["reliable"] for r in rows)
    assert all(f"other programs kept {usable_cores():.1f} cores busy" in str(r["reliability"]) for r in rows)
    assert len(tb.table_batching_flags(rows)) >= 2  # both counts (and maybe a step back)


def test_a_quiet_sweep_is_not_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    import recnotebooks.measure.table_batching as tb

    monkeypatch.setattr(tb, "reliability", lambda *a: "")
    rows = measure_table_batching((1, 2), repeats=1, steps=1)
    assert all(r["reliable"] and r["reliability"] == "" for r in rows)


def test_the_chart_says_when_the_sweep_is_not_a_trend() -> None:
    from recnotebooks.viz.architecture import table_batching_chart

    def title(rows: list[dict[str, object]]) -> str:
        rows = [{**r, "threads": 1, "repeats": 3, "what": "a step"} for r in rows]
        return str(table_batching_chart(rows).to_dict().get("title", {}).get("text", ""))

    assert "NOT RELIABLE" not in title(_sweep({1: 0.8, 10: 1.5, 50: 3.0}))
    assert title(_sweep({1: 0.8, 10: 1.5, 20: 1.0, 50: 3.0})).startswith("⚠ NOT RELIABLE as a trend")
    assert title(_sweep({1: 0.8, 10: 1.5}, {1: "its runs varied 3.0-fold"})).startswith("⚠ NOT RELIABLE")
