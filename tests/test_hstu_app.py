"""The Generative Recommender Explorer (notebook 07): its pure function against the library it draws,
its lengths and padding against naive counts, every control moving the numbers, and the measured
panel's wiring."""

from __future__ import annotations

import pytest

from recnotebooks.config import hstu_preset
from recnotebooks.measure.step import StepMeasurement
from recnotebooks.perf.hardware import CALIBRATED_BY, HARDWARE, is_calibrated
from recnotebooks.perf.hstu import COMPONENTS, hstu_step
from recnotebooks.viz import hstu as app_module
from recnotebooks.viz.hstu import (
    HSTU_CONTROLS,
    explore_hstu,
    flops_per_byte,
    history_lengths,
    hstu_explorer,
    hstu_model,
)


def _metrics(result: object) -> dict[str, float]:
    return {str(r["metric"]): float(r["value"]) for r in result.tables["metrics"]}  # type: ignore[attr-defined]


def test_the_modeled_tables_are_the_cost_models_steps() -> None:
    r = explore_hstu(measure=False, lengths=0.5, layers=2, heads=2, batch=256, nodes=2)
    config, run = hstu_model("dlrmv4", 2, 2, 4096), history_lengths(256, 0.5, 4096)
    jagged = hstu_step(config, "dgx_h100", run, gpus=8, nodes=2)
    padded = hstu_step(config, "dgx_h100", run, gpus=8, nodes=2, padded=True)
    for layout, step in (("jagged", jagged), ("padded", padded)):
        rows = {x["phase"]: x["seconds_per_step"] for x in r.tables["modeled"] if x["layout"] == layout}
        assert rows == {c: step.seconds[c] for c in COMPONENTS if step.seconds[c] > 0}
    m = _metrics(r)
    assert m["step time, jagged"] == pytest.approx(jagged.step_seconds * 1e3)
    assert m["MFU, jagged (bf16 peak)"] == pytest.approx(jagged.mfu())
    assert m["padded step ÷ jagged step"] == pytest.approx(padded.step_seconds / jagged.step_seconds)
    assert padded.step_seconds > jagged.step_seconds
    assert {x["source"] for t in r.tables.values() for x in t} == {"modeled"}
    assert config.heads == 2 and config.head_dims == (128, 128) and config.num_layers == 2


def test_the_padding_bar_is_a_naive_count_of_padded_tokens() -> None:
    run = history_lengths(64, 1 / 8, 4096)
    mask = [[1 if i < n else 0 for i in range(max(run))] for n in run]  # a padded batch's mask
    zeros = sum(row.count(0) for row in mask) / sum(len(row) for row in mask)
    assert _metrics(explore_hstu(measure=False, lengths=1 / 8, batch=64))["padding in a padded batch"] == (
        pytest.approx(zeros)
    )
    assert _metrics(explore_hstu(measure=False, spread="all equal"))["padding in a padded batch"] == 0


def test_history_lengths_keep_yambdas_shape_and_one_length_keeps_the_tokens() -> None:
    yambda = history_lengths(1001, 1.0, 28_000)
    assert sorted(yambda)[500] == 2700  # the median quantile
    assert sum(yambda) / len(yambda) == pytest.approx(4800, rel=0.05)
    capped = history_lengths(512, 1.0, 4096)
    same = history_lengths(512, 1.0, 4096, spread="all equal")
    assert len(set(same)) == 1 and sum(same) == pytest.approx(sum(capped), abs=512)
    assert max(history_lengths(64, 1 / 16, 512)) <= 512 and min(history_lengths(64, 1 / 16, 512)) >= 1


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"scale": 0}, "scale"),
        ({"scale": True}, "scale"),
        ({"spread": "uniform"}, "spread"),
        ({"count": 0}, "count"),
    ],
)
def test_history_lengths_refuse_bad_input_naming_it(kw: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"count": 8, "scale": 1.0, "longest": 512, **kw}
    with pytest.raises((ValueError, TypeError), match=match):
        history_lengths(**args)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def app() -> app_module.App:
    return hstu_explorer(measure=False)


@pytest.mark.parametrize("name", list(HSTU_CONTROLS))
def test_every_control_moves_the_modeled_numbers(app: app_module.App, name: str) -> None:
    defaults = {k: v["value"] for k, v in HSTU_CONTROLS.items()}
    app.set(**defaults)
    start = _metrics(app.result)
    options = [o[1] if isinstance(o, tuple) else o for o in HSTU_CONTROLS[name]["options"]]  # type: ignore[union-attr]
    other = next(o for o in options if o != defaults[name])
    moved = _metrics(app.set(**{name: other}))
    assert app.error is None and moved != start, f"{name}={other!r} changed nothing"
    app.altair_chart.to_dict()  # the app skips schema validation for speed; the test does not


def test_the_notes_say_whether_the_tables_fit(app: app_module.App) -> None:
    app.set(**{k: v["value"] for k, v in HSTU_CONTROLS.items()})  # the module's app, as another test left it
    r = app.set(hardware="dgx_a100", nodes=1, lengths=1.0, spread="Yambda-shaped")  # 75 GB of tables on 40 GB
    assert any("does NOT fit" in n and "75.2 GB of table shards" in n for n in r.notes), r.notes
    r = app.set(hardware="gb200_nvl72")
    assert any("it fits" in n and "the fewest gb200_nvl72 GPUs that hold it: 5" in n for n in r.notes), (
        r.notes
    )
    r = app.set(hardware="dgx_h100", batch=1024)
    assert any("no number of dgx_h100 GPUs holds it" in n for n in r.notes), r.notes


def test_shorter_histories_move_the_bound_off_attention() -> None:
    def bound(scale: float) -> str:
        result = explore_hstu(measure=False, lengths=scale, nodes=1)
        rows = {
            x["phase"]: float(x["seconds_per_step"])
            for x in result.tables["modeled"]
            if x["layout"] == "jagged"
        }
        return max(rows, key=rows.__getitem__)

    assert bound(1.0) == "attention" and bound(1 / 16) != "attention"


def test_the_measured_panel_draws_the_measurement_beside_the_model_of_this_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = {}

    def fake(config: object, lengths: list[int], **kw: object) -> StepMeasurement:
        asked.update(config=config, lengths=lengths)
        return StepMeasurement(
            "hstu_small", len(lengths), "cpu", 0, 3, {"forward": 0.01, "backward": 0.02}, 0.03
        )

    monkeypatch.setattr(app_module, "measure_hstu_step", fake)
    monkeypatch.setattr(app_module, "_MEASURED", {})
    r = explore_hstu(lengths=0.5, layers=2, heads=4)
    small = asked["config"]
    assert small.name == "hstu_small" and (small.num_layers, small.heads, small.head_dims) == (2, 4, (32, 32))
    assert asked["lengths"] == history_lengths(app_module.MEASURED_HISTORIES, 0.5 / 50, 512)
    where = {(x["where"], x["source"]) for x in r.tables["measured"]}
    assert where == {("MEASURED here", "measured"), ("MODELED for this machine", "modeled")}
    assert any(n.startswith("MEASURED here") and "30.0 ms" in n for n in r.notes)
    app = hstu_explorer()
    assert "A step of hstu_small here" in str(app.altair_chart.to_dict())


@pytest.mark.parametrize("calibrated", [False, True])
def test_the_measured_note_says_when_the_model_of_this_machine_is_uncalibrated(
    monkeypatch: pytest.MonkeyPatch, calibrated: bool
) -> None:
    defaults = HARDWARE["this_machine"]
    machine = defaults.replace(description=f"this machine, {CALIBRATED_BY}") if calibrated else defaults
    real = app_module.hardware
    monkeypatch.setattr(app_module, "hardware", lambda n: machine if n == "this_machine" else real(n))
    monkeypatch.setattr(
        app_module,
        "measure_hstu_step",
        lambda *a, **k: StepMeasurement("hstu_small", 16, "cpu", 0, 3, {"forward": 0.01}, 0.01),
    )
    monkeypatch.setattr(app_module, "_MEASURED", {})
    note = next(n for n in explore_hstu(lengths=0.5).notes if n.startswith("MEASURED here"))
    assert ("uncalibrated defaults" in note and "run recnb calibrate" in note) is not calibrated
    assert is_calibrated(machine) is calibrated and not is_calibrated(HARDWARE["dgx_h100"])
    with pytest.raises(TypeError, match="hw must be a Hardware"):
        is_calibrated("this_machine")  # type: ignore[arg-type]


def test_flops_per_byte_grows_with_the_history_and_dlrm_stays_put() -> None:
    rows = flops_per_byte()
    hstu = [r for r in rows if str(r["model"]).startswith("DLRMv4")]
    dcn = {float(r["flops_per_byte"]) for r in rows if str(r["model"]).startswith("DLRM-DCNv2")}  # type: ignore[arg-type]
    assert len(dcn) == 1 and all(float(r["flops_per_byte"]) > next(iter(dcn)) for r in hstu)  # type: ignore[arg-type]
    v4 = hstu_preset("dlrmv4")
    one = next(r for r in hstu if r["length"] == 64)
    assert (
        one["bytes"] == (64 * 3 + 8) * (4 * 512 * 4 + 8) and len(v4.context) == 8
    )  # 3 rows an event, 8 a history
    with pytest.raises(ValueError, match="lengths"):
        flops_per_byte((8192,))
