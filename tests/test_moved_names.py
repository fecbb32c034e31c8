"""Public names that moved keep working from their old modules until the next release.

Each old module re-exports the very objects of the new home (no copy, no warning at import);
ARCHITECTURE.md's "Moved names" table lists them. Delete a row here when its re-export goes.
"""

from __future__ import annotations

import importlib

import pytest

#: old module -> (new module, the names that moved to it)
MOVED: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "recnotebooks.perf.mlperf": [
        (
            "recnotebooks.published.mlperf",
            (
                "FIT_ROUNDS",
                "HELD_OUT_ROUNDS",
                "MLPerfResult",
                "RUNS_REQUIRED",
                "TARGET_AUC",
                "TRAIN_SAMPLES",
                "median_or_none",
                "olympic_mean",
            ),
        ),  # fmt: skip
        ("recnotebooks.published.mlperf_results", ("MLPERF_DCNV2_RESULTS", "READ_DATE", "SOURCE_COMMITS")),
    ],
    "recnotebooks.distributed.training": [
        (
            "recnotebooks.distributed.hstu_training",
            (
                "HSTUDistResult",
                "HSTUTrainSettings",
                "check_hstu_run",
                "local_histories",
                "run_hstu_rank",
                "train_hstu_local",
            ),
        ),  # fmt: skip
        ("recnotebooks.distributed.rank_data", ("CriteoFiles",)),
    ],
    "recnotebooks.cli": [
        ("recnotebooks.commands.dispatch", ("main",)),
        ("recnotebooks.commands.parser", ("build_parser",)),
        (
            "recnotebooks.commands.settings",
            ("TRAIN_DEFAULTS", "CLIError", "config_from_args", "training_settings"),
        ),
    ],
    "recnotebooks.cache.commands": [
        ("recnotebooks.commands.cache", ("add_cache_sim_parser", "cache_sim", "run_cache_sim")),
        ("recnotebooks.commands.settings", ("CURVE_POINTS", "MAX_IDS")),
    ],
    "recnotebooks.measure.commands": [("recnotebooks.commands.measure", ("print_validation",))],
    "recnotebooks.perf.sources": [("recnotebooks.published.sources", ("DOCUMENTS", "cite"))],
    "recnotebooks.perf.published": [
        ("recnotebooks.published.runs", ("TORCHREC_README_ROWS", "TORCHREC_UVM", "TORCHREC_UVM_SOURCE")),
        (
            "recnotebooks.perf.mlperf_setup",
            (
                "CPU_SETUP",
                "MLPERF_RUNS",
                "MLPERF_SETUP",
                "PUBLISHED_RUNS",
                "PublishedRun",
                "estimate_run",
                "mlperf_seconds",
                "mlperf_throughput",
            ),
        ),  # fmt: skip
        (
            "recnotebooks.perf.compare",
            (
                "MLPERF_BAND",
                "MLPERF_RATIOS",
                "compare_published",
                "fit_hugectr_step",
                "mlperf_by_system",
                "mlperf_errors",
                "mlperf_outside_band",
                "mlperf_phases",
                "mlperf_ratios",
                "modeled_phases",
                "published_utilisation",
                "torchrec_uvm_example",
            ),
        ),  # fmt: skip
    ],
    "recnotebooks.viz.architecture": [
        (
            "recnotebooks.measure.step",
            (
                "MAX_MEASURED_STEP_S",
                "MEASURED_STEPS",
                "MEASURE_DEADLINE_S",
                "check_measurable",
                "measure_here",
            ),
        ),
    ],
    "recnotebooks.viz.cache": [
        (
            "recnotebooks.cache.curves",
            (
                "CURVE_FRACTIONS",
                "FEW_FRACTIONS",
                "POLICY_NAMES",
                "POOLING",
                "TRACE_IDS",
                "cache_capacity",
                "cache_profile",
                "cache_trace",
                "first_touches",
                "hit_rate_curves",
                "opt_hit_rate",
            ),
        ),
        (
            "recnotebooks.measure.cache_overhead",
            (
                "MEASURED_BATCH",
                "MEASURED_DIM",
                "MEASURED_POOLING",
                "MEASURED_ROWS_CAP",
                "MEASURED_WARMUP",
                "measure_cache_overhead",
            ),
        ),
    ],
    "recnotebooks.perf.convergence": [
        (
            "recnotebooks.published.convergence",
            (
                "DEFAULT_ROUND",
                "EPOCHS_FROM",
                "EVAL_EVERY_EPOCHS",
                "EVAL_SAMPLES",
                "RCPS",
                "RCP_SOURCE",
                "RULES",
                "ReferencePoint",
                "TRAIN_SAMPLES",
                "convergence_curve",
                "curve_points",
                "epochs_to_converge",
                "evaluations",
                "rules_for_round",
                "samples_to_converge",
                "time_to_train",
            ),
        ),  # fmt: skip
    ],
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_hands_on_the_new_homes_objects(old: str) -> None:
    module = importlib.import_module(old)
    for new, names in MOVED[old]:
        home = importlib.import_module(new)
        for name in names:
            assert getattr(module, name) is getattr(home, name), f"{old}.{name} is not {new}.{name}"


def test_the_new_convergence_module_exports_what_the_old_one_did() -> None:
    old = importlib.import_module("recnotebooks.perf.convergence")
    new = importlib.import_module("recnotebooks.published.convergence")
    assert set(new.__all__) <= set(old.__all__)


def test_a_renamed_name_is_the_new_homes_object() -> None:
    """Names that moved under a new name (ARCHITECTURE.md's table says "renamed")."""
    from recnotebooks.distributed.training import dense_optimizer_for
    from recnotebooks.nn.optim import make_dense_optimizer

    assert dense_optimizer_for is make_dense_optimizer

    from recnotebooks.commands.parser import add_measure_parsers
    from recnotebooks.measure.commands import add_parsers

    assert add_parsers is add_measure_parsers


def test_the_old_measure_run_keeps_its_signature() -> None:
    """``recnotebooks.measure.commands.run(args, error)``: a bad setting raises ``error``, as before."""
    import argparse

    from recnotebooks.measure.commands import run

    args = argparse.Namespace(command="validate", device="auto", quick=True, saved=False, distributed=False)
    with pytest.raises(LookupError, match="--device must be one of cpu, cuda or cuda:N"):
        run(args, LookupError)
