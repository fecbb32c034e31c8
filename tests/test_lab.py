"""Exercise checks: right answers pass, wrong ones get escalating hints, never the answer."""

from __future__ import annotations

import pytest

from recnotebooks import lab
from recnotebooks.config import preset
from recnotebooks.viz.architecture import architecture_config
from recnotebooks.viz.traffic import lookup_traffic_app


@pytest.fixture(autouse=True)
def _fresh() -> None:
    lab.reset()


def test_smoke_mode_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECNB_SMOKE", "1")
    assert lab.smoke_mode()
    monkeypatch.setenv("RECNB_SMOKE", "0")
    assert not lab.smoke_mode()
    monkeypatch.delenv("RECNB_SMOKE")
    assert not lab.smoke_mode()


def test_right_answers_pass() -> None:
    assert lab.check("01.parameters", preset("tiny").parameters)
    assert lab.check(
        "01.interaction", architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim
    )
    import torch

    assert lab.check("00.threads", torch.get_num_threads())


@pytest.mark.parametrize("exercise_id", ["01.parameters", "01.interaction"])
def test_wrong_answers_get_escalating_hints_not_the_answer(exercise_id: str) -> None:
    expected = {
        "01.parameters": preset("tiny").parameters,
        "01.interaction": architecture_config(num_tables=8, embedding_dim=32).interaction_output_dim,
    }[exercise_id]
    hints = lab.EXERCISES[exercise_id].hints
    seen = []
    for k in range(len(hints) + 1):
        fb = lab.check(exercise_id, expected + 1)
        assert not fb and f"Hint {min(k + 1, len(hints))}/{len(hints)}" in fb.message
        for text in (fb.message, fb._repr_html_(), str(fb)):
            assert str(expected) not in text and f"{expected:,}" not in text
        seen.append(fb.message)
    assert len(set(seen)) == len(hints)  # every hint shown once, the last one repeats


def test_a_malformed_answer_is_feedback_not_an_exception() -> None:
    fb = lab.check("01.parameters", "many")
    assert not fb and "as a number" in fb.message
    with pytest.raises(KeyError, match="not an exercise"):
        lab.check("99.nope", 1)


def test_app_exercises_read_the_apps_current_result() -> None:
    app = lookup_traffic_app()
    assert "embedding dim to 32" in lab.check("00.traffic", app).message
    app.set(embedding_dim=32, batch_size=4096, pooling=80)  # 4096*26*80*(32*4+8) bytes = 1.16 GB
    assert lab.check("00.traffic", app)
    app.set(batch_size=8192)  # 2.3 GB
    assert not lab.check("00.traffic", app)


def test_exercises_are_listed_per_notebook() -> None:
    ids = [i for i, _ in lab.exercises("01")]
    assert ids and all(i.startswith("01.") for i in ids)


def test_numpy_and_torch_scalars_are_numbers() -> None:
    import numpy as np
    import torch

    assert lab.check("01.parameters", np.int64(preset("tiny").parameters))
    assert lab.check("01.parameters", torch.tensor(preset("tiny").parameters))


def test_server_explorer_exercise_matches_the_memory_model() -> None:
    from recnotebooks.perf import estimate, hardware, plan_tables
    from recnotebooks.perf.planner import RESERVE
    from recnotebooks.viz.controls import option_values
    from recnotebooks.viz.servers import SERVER_CONTROLS, scaled_model

    scales = option_values(SERVER_CONTROLS["rows_scale"])

    def fits_in_hbm(
        scale: object,
    ) -> bool:  # a size-balanced plan, every table in HBM, the planner's reserve kept
        cfg = scaled_model("rm2", scale)  # type: ignore[arg-type]
        plan = plan_tables(cfg, "big_basin", 8, strategy="greedy", placement="hbm", batch_size=8192)
        used = max(
            d["total"] for d in estimate(cfg, "big_basin", batch_size=8192, gpus=8, plan=plan).memory.device
        )
        return used <= hardware("big_basin").hbm_bytes * (1 - RESERVE)

    first = next(s for s in scales if not fits_in_hbm(s))
    assert lab.check("05.outgrow", first)
    assert scales.index(first) > 0  # some settings fit, so there is a wrong answer below it
    wrong = lab.check("05.outgrow", scales[scales.index(first) - 1])
    assert not wrong and "Hint 1/3" in wrong.message
    assert "slider" in lab.check("05.outgrow", 7).message
    import numpy as np

    assert lab.check("05.outgrow", np.float64(first))  # NumPy scalars are numbers too
