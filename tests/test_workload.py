"""config.Workload: one checked, frozen value for the step settings."""

from __future__ import annotations

import dataclasses

import pytest

from recnotebooks.config import DTYPES, Workload, preset
from recnotebooks.perf.precision import precision_names


def test_fields_and_defaults() -> None:
    w = Workload(preset("tiny"), batch_size=256)
    assert (w.batch_size, w.dtype, w.zipf_exponent) == (256, "fp32", 1.05)
    assert (w.sparse_optimizer, w.dense_optimizer) == ("rowwise_adagrad", "adagrad")


def test_frozen_and_replace_checks_again() -> None:
    w = Workload(preset("tiny"), batch_size=256)
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.batch_size = 512  # type: ignore[misc]
    assert w.replace(dtype="bf16").dtype == "bf16"
    with pytest.raises(ValueError, match="batch_size"):
        w.replace(batch_size=0)
    with pytest.raises(TypeError, match="unknown field"):
        w.replace(batch=3)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("config", "tiny", TypeError),
        ("batch_size", 0, ValueError),
        ("batch_size", 2.5, TypeError),
        ("dtype", "fp8", ValueError),
        ("zipf_exponent", -0.1, ValueError),
        ("zipf_exponent", float("nan"), ValueError),
        ("sparse_optimizer", "adam", ValueError),
        ("dense_optimizer", "lion", ValueError),
    ],
)
def test_bad_field_names_itself(field: str, value: object, error: type[Exception]) -> None:
    kwargs: dict[str, object] = {"config": preset("tiny"), "batch_size": 256, field: value}
    with pytest.raises(error, match=field):
        Workload(**kwargs)  # type: ignore[arg-type]


def test_dtypes_are_the_modeled_precisions() -> None:
    assert sorted(DTYPES) == sorted(precision_names())
