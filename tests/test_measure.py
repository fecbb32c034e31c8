"""measure_step: a measured per-phase step time of a row-capped copy."""

from __future__ import annotations

import pytest

from recnotebooks.config import preset
from recnotebooks.measure import DoesNotFitError, default_max_rows, measure_step, measurement_bytes
from recnotebooks.timing import PHASES


def test_measures_every_phase_of_a_capped_copy() -> None:
    cfg = preset("criteo_kaggle")
    m = measure_step(cfg, 256, max_rows=2000, time_budget_s=0.0, min_steps=3, max_steps=3)
    assert m.steps == 3 and m.max_rows == 2000 and m.source == "measured" and m.device == "cpu"
    assert list(m.phases) == list(PHASES)
    assert m.seconds_per_step == pytest.approx(sum(m.phases.values()))
    assert m.phases["embedding_forward"] > 0 and m.phases["top_mlp"] > 0
    rows = m.table(setting="x")
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert m.samples_per_s == pytest.approx(256 / m.seconds_per_step)


def test_time_budget_bounds_the_steps() -> None:
    m = measure_step(preset("tiny"), 64, time_budget_s=10.0, max_steps=4)
    assert m.steps == 4


def test_default_cap_keeps_tables_small() -> None:
    cfg = preset("criteo_terabyte")
    cap = default_max_rows(cfg)
    assert (
        cap * cfg.num_tables * cfg.embedding_dim * 4
        <= 64 * 1024**2 + cfg.num_tables * cfg.embedding_dim * 4 * 1024
    )
    assert default_max_rows(preset("tiny")) == max(t.num_rows for t in preset("tiny").tables)


def test_refuses_what_would_not_fit() -> None:
    cfg = preset("rm2")
    need = measurement_bytes(cfg, 4096, 1000)
    assert need > 4096 * cfg.lookups_per_sample * cfg.embedding_dim * 4  # at least the rows it gathers
    with pytest.raises(DoesNotFitError, match=r"batch_size=4096 .* GB"):
        measure_step(cfg, 4096, max_rows=1000, memory_budget=need - 1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"batch_size": 0}, "batch_size must be"), ({"max_rows": 0}, "max_rows must be"),
     ({"time_budget_s": -1.0}, "time_budget_s"), ({"min_steps": 3, "max_steps": 2}, "max_steps must be")],
)  # fmt: skip
def test_bad_input(kw: dict, match: str) -> None:
    args = {"batch_size": 64, **kw}
    with pytest.raises(ValueError, match=match):
        measure_step(preset("tiny"), **args)
