"""Hardware presets (sources, validation) and Zipf access statistics against direct references."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.perf.access import cache_rows_for_hit_rate, expected_unique, hit_rate
from recnotebooks.perf.calibration_file import load_probe
from recnotebooks.perf.hardware import HARDWARE, Hardware, hardware, load_calibration, save_calibration

CITED = ("peak_flops", "hbm_bytes", "hbm_bw", "power_w", "nic_bw", "gemm_max_efficiency", "gather_efficiency",
         "op_overhead_s")  # fmt: skip
PRESETS = [n for n in HARDWARE if n != "this_machine"]


def zipf_pmf(n_rows: int, s: float) -> np.ndarray:
    """Exact bounded Zipf probabilities of ranks 1..n_rows."""
    w = np.arange(1, n_rows + 1, dtype=np.float64) ** (-s)
    return w / w.sum()


def simulated_unique(n_rows: int, n_lookups: int, s: float, draws: int, seed: int = 0) -> float:
    """Mean number of distinct ids over ``draws`` samples of ``n_lookups`` Zipf ids."""
    rng = np.random.default_rng(seed)
    p = zipf_pmf(n_rows, s)
    return float(np.mean([np.unique(rng.choice(n_rows, size=n_lookups, p=p)).size for _ in range(draws)]))


def exact_hit_rate(k: int, n_rows: int, s: float) -> float:
    """Share of lookups that go to the ``k`` hottest rows, by a plain loop."""
    total = sum(i ** (-s) for i in range(1, n_rows + 1))
    return sum(i ** (-s) for i in range(1, k + 1)) / total


# ----- hardware ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", PRESETS)
def test_every_hardware_constant_cites_a_source(name: str) -> None:
    src = HARDWARE[name].sources
    missing = [f for f in CITED if not str(src.get(f, "")).strip()]
    assert not missing, f"{name} has no source for {missing}"


@pytest.mark.parametrize("field", ["hbm_bw", "hbm_bytes", "nic_bw", "power_w", "gemm_half_dim", "sort_rate"])
@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf")])
def test_positive_fields_reject_zero_negative_nan_inf(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        HARDWARE["dgx_a100"].replace(**{field: value})


@pytest.mark.parametrize("field", ["op_overhead_s", "collective_latency_s", "step_overhead_s"])
@pytest.mark.parametrize("value", [-1e-6, float("nan"), float("inf")])
def test_non_negative_fields(field: str, value: float) -> None:
    assert getattr(HARDWARE["dgx_a100"].replace(**{field: 0.0}), field) == 0.0
    with pytest.raises(ValueError, match=field):
        HARDWARE["dgx_a100"].replace(**{field: value})


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"peak_flops": {"int8": 1e12}}, "dtype"),
        ({"peak_flops": {"fp32": -1.0}}, "peak_flops"),
        ({"peak_flops": {"fp32": float("nan")}}, "peak_flops"),
        ({"peak_flops": {}}, "peak_flops"),
        ({"hbm_bw": True}, "hbm_bw"),
        ({"hbm_bw": "1e12"}, "hbm_bw"),
        ({"gemm_max_efficiency": 1.5}, "gemm_max_efficiency"),
        ({"gather_efficiency": 5.0}, "gather_efficiency"),
        ({"devices": 0}, "devices"),
        ({"kind": "tpu"}, "kind"),
    ],
)
def test_bad_hardware_values_raise_naming_the_field(changes: dict[str, object], needle: str) -> None:
    with pytest.raises((TypeError, ValueError), match=needle):
        HARDWARE["dgx_a100"].replace(**changes)


def test_hardware_lookup_and_overrides() -> None:
    with pytest.raises(ValueError, match="dgx_a100") as e:
        hardware("nope")
    assert "nope" in str(e.value) and "big_basin" in str(e.value)
    hw = hardware("dgx_a100", hbm_bytes=80e9)
    assert isinstance(hw, Hardware) and hw.hbm_bytes == 80e9
    assert HARDWARE["dgx_a100"].hbm_bytes == 40e9  # the preset itself is untouched
    assert hw.sources == HARDWARE["dgx_a100"].sources
    assert hardware(hw) is hw


# ----- the saved calibration (stored and loaded by perf.hardware in perf.calibration_file's file) ----
def test_this_machine_loads_without_importing_the_microbenchmarks(tmp_path: Path) -> None:
    """perf.hardware reads the saved calibration itself: no hardware <-> calibrate cycle."""
    saved = tmp_path / "cal.json"
    save_calibration(HARDWARE["this_machine"].replace(power_w=42.0), {"gflops": 1.0, "copy_bw": 1.0}, saved)
    code = (
        "import sys; from recnotebooks.perf.hardware import hardware; hw = hardware('this_machine'); "
        "print(hw.power_w, 'recnotebooks.measure.calibrate' in sys.modules)"
    )
    env = {**os.environ, "RECNB_CALIBRATION": str(saved)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["42.0", "False"]


def test_calibrate_reexports_the_storage_functions() -> None:
    calibrate = importlib.import_module("recnotebooks.measure.calibrate")
    hardware_module = importlib.import_module("recnotebooks.perf.hardware")
    file_module = importlib.import_module("recnotebooks.perf.calibration_file")
    for name in ("save_calibration", "load_calibration"):
        assert getattr(calibrate, name) is getattr(hardware_module, name)
    for name in ("calibration_path", "load_probe"):
        assert getattr(calibrate, name) is getattr(file_module, name)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"hardware": {"name": "x"}}), "TypeError"),
        (
            json.dumps({"hardware": {**dataclasses.asdict(HARDWARE["this_machine"]), "peak_flops": [1]}}),
            "Error",
        ),
        (json.dumps({"hardware": {**dataclasses.asdict(HARDWARE["this_machine"]), "hbm_bw": -1}}), "hbm_bw"),
    ],
)
def test_a_corrupt_calibration_is_ignored_with_a_warning_naming_the_file(
    tmp_path: Path, content: str, needle: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.warns(UserWarning, match=needle) as record:
        assert load_calibration(bad) is None
    assert str(bad) in str(record[0].message)


def test_a_missing_calibration_is_silent(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_calibration(tmp_path / "none.json") is None and load_probe(tmp_path / "none.json") is None


@pytest.mark.parametrize("speed", [0, -1.0, float("nan"), float("inf"), "12", True, None, [1.0]])
def test_a_probe_without_finite_positive_speeds_is_refused(tmp_path: Path, speed: object) -> None:
    path = tmp_path / "cal.json"
    save_calibration(HARDWARE["this_machine"], {"gflops": speed, "copy_bw": 1e9}, path)  # type: ignore[dict-item]
    assert load_probe(path) is None
    save_calibration(HARDWARE["this_machine"], {"gflops": 100.0, "copy_bw": 1e9}, path)
    assert load_probe(path) == {"gflops": 100.0, "copy_bw": 1e9}


@pytest.mark.parametrize("name", PRESETS)
def test_flops_tf32_falls_back_to_fp32(name: str) -> None:
    hw = HARDWARE[name]
    want = hw.peak_flops["tf32"] if "tf32" in hw.peak_flops else hw.peak_flops["fp32"]
    assert hw.flops("tf32") == want
    assert hw.flops("fp32") == hw.peak_flops["fp32"]
    with pytest.raises(ValueError, match="int8"):
        hw.flops("int8")


def test_flops_without_that_dtype_raises() -> None:
    assert HARDWARE["big_basin"].flops("tf32") == 15.7e12
    assert HARDWARE["dgx_a100"].flops("tf32") == 156e12
    with pytest.raises(ValueError, match="bf16"):
        HARDWARE["big_basin"].flops("bf16")


# ----- expected unique rows ------------------------------------------------------------------
@pytest.mark.parametrize(
    "n_rows,n_lookups,s,draws",
    [
        (10, 20, 1.05, 400),
        (64, 30, 1.05, 400),
        (50, 100, 0.5, 400),
        (64, 64, 0.0, 400),
        (5000, 2000, 0.9, 20),
        (1_000_000, 100_000, 1.05, 3),
        (1_000_000, 50_000, 0.8, 3),
        (100_000, 300_000, 1.2, 3),
    ],
)
def test_expected_unique_matches_monte_carlo(n_rows: int, n_lookups: int, s: float, draws: int) -> None:
    sim = simulated_unique(n_rows, n_lookups, s, draws)
    assert expected_unique(n_lookups, n_rows, s) == pytest.approx(sim, rel=0.05)


@given(n=st.floats(0, 1e7), n_rows=st.integers(1, 10**8), s=st.floats(0, 2.5))
def test_expected_unique_bounds(n: float, n_rows: int, s: float) -> None:
    u = expected_unique(n, n_rows, s)
    assert 0 <= u <= min(n, n_rows) + 1e-9


@given(a=st.floats(0, 1e6), b=st.floats(0, 1e6), n_rows=st.integers(1, 10**7), s=st.floats(0, 2.5))
def test_expected_unique_monotone_in_lookups(a: float, b: float, n_rows: int, s: float) -> None:
    lo, hi = sorted((a, b))
    assert expected_unique(lo, n_rows, s) <= expected_unique(hi, n_rows, s) * (1 + 1e-12)


@given(n_rows=st.integers(1, 10**9), s=st.floats(0, 3))
def test_expected_unique_of_nothing_is_zero(n_rows: int, s: float) -> None:
    assert expected_unique(0, n_rows, s) == 0.0


def test_expected_unique_of_uniform_is_occupancy_formula() -> None:
    # s = 0 is uniform: N (1 - exp(-n/N)) in the Poisson form, exact for small tables
    for n_rows, n in ((20, 7), (64, 200)):
        assert expected_unique(n, n_rows, 0.0) == pytest.approx(n_rows * -math.expm1(-n / n_rows), rel=1e-12)


# ----- hit rate and its inverse --------------------------------------------------------------
@pytest.mark.parametrize("n_rows", [1, 2, 7, 33, 64])
@pytest.mark.parametrize("s", [0.0, 0.5, 1.05, 2.0])
def test_hit_rate_exact_for_small_tables(n_rows: int, s: float) -> None:
    for k in range(n_rows + 1):
        assert hit_rate(k, n_rows, s) == pytest.approx(exact_hit_rate(k, n_rows, s), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n_rows", [65, 1000, 2000, 4000])
@pytest.mark.parametrize("s", [0.0, 0.5, 1.05, 1.5])
def test_hit_rate_binned_close_to_exact(n_rows: int, s: float) -> None:
    w = np.arange(1, n_rows + 1, dtype=np.float64) ** (-s)
    cum = np.cumsum(w) / w.sum()
    for k in sorted({1, 2, 3, 10, n_rows // 7, n_rows // 3, n_rows // 2, n_rows - 1}):
        assert hit_rate(k, n_rows, s) == pytest.approx(cum[k - 1], rel=0.02)


@given(n_rows=st.integers(1, 10**8), s=st.floats(0, 3))
def test_hit_rate_ends(n_rows: int, s: float) -> None:
    assert hit_rate(n_rows, n_rows, s) == 1.0
    assert hit_rate(2 * n_rows, n_rows, s) == 1.0
    assert hit_rate(0, n_rows, s) == 0.0


@given(h=st.floats(0.05, 0.99), n_rows=st.integers(1, 10**8), s=st.floats(0, 2.5))
def test_cache_rows_for_hit_rate_inverts_hit_rate(h: float, n_rows: int, s: float) -> None:
    k = cache_rows_for_hit_rate(h, n_rows, s)
    assert 0 < k <= n_rows
    assert hit_rate(k, n_rows, s) >= h - 1e-6
    if k < n_rows:  # and it is (nearly) the fewest: a cache 1% smaller misses the target
        assert hit_rate(0.99 * k, n_rows, s) < h + 1e-6


def test_cache_rows_for_hit_rate_ends() -> None:
    assert cache_rows_for_hit_rate(0.0, 1000) == 0.0
    assert cache_rows_for_hit_rate(1.0, 1000) == pytest.approx(1000, rel=1e-9)


@pytest.mark.parametrize(
    "call,needle",
    [
        (lambda: expected_unique(10, 0), "n_rows"),
        (lambda: expected_unique(10, 2.5), "n_rows"),  # type: ignore[arg-type]
        (lambda: expected_unique(10, 100, -1), "zipf_exponent"),
        (lambda: expected_unique(10, 100, float("nan")), "zipf_exponent"),
        (lambda: expected_unique(-1, 100), "n_lookups"),
        (lambda: expected_unique(float("inf"), 100), "n_lookups"),
        (lambda: hit_rate(10, 0), "n_rows"),
        (lambda: hit_rate(10, 100, -1), "zipf_exponent"),
        (lambda: hit_rate(-1, 100), "cached_rows"),
        (lambda: hit_rate(float("nan"), 100), "cached_rows"),
        (lambda: cache_rows_for_hit_rate(1.5, 100), "cache_hit_rate"),
        (lambda: cache_rows_for_hit_rate(-0.1, 100), "cache_hit_rate"),
        (lambda: cache_rows_for_hit_rate(0.5, 0), "n_rows"),
        (lambda: cache_rows_for_hit_rate(0.5, 100, -1), "zipf_exponent"),
    ],
)
def test_bad_access_inputs_raise_naming_the_parameter(call: Callable[[], object], needle: str) -> None:
    with pytest.raises((TypeError, ValueError), match=needle):
        call()
