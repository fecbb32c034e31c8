"""The recnb command: JSON output, overrides, doctor, and bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recnotebooks.cli import build_parser, config_from_args, main


def run_json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_train_json_has_the_contract_fields(capsys):
    r = run_json(capsys, ["train", "--preset", "tiny", "--steps", "6", "--batch-size", "64",
                          "--max-rows", "500", "--eval-batches", "2", "--json"])  # fmt: skip
    for key in ("samples_per_s", "auc", "logloss", "ne", "steps", "batch_size", "phases"):
        assert key in r, key
    assert r["steps"] == 6 and r["batch_size"] == 64 and r["source"] == "measured"
    assert set(r["phases"]) >= {"data", "embedding_forward", "bottom_mlp", "interaction", "top_mlp",
                                "backward", "sparse_optimizer", "dense_optimizer"}  # fmt: skip
    assert 0 <= r["auc"] <= 1


def test_architecture_overrides_in_dlrm_notation():
    args = build_parser().parse_args(
        [
            "train",
            "--tables",
            "3",
            "--rows",
            "100",
            "--dim",
            "8",
            "--pooling",
            "4",
            "--bottom",
            "13-32-8",
            "--top",
            "16-1",
            "--interaction",
            "cat",
        ]  # fmt: skip
    )
    cfg = config_from_args(args)
    assert cfg.num_tables == 3 and all(t.num_rows == 100 and t.pooling_factor == 4 for t in cfg.tables)
    assert cfg.num_dense == 13 and cfg.bottom_mlp == (32, 8) and cfg.top_mlp == (16, 1)
    assert cfg.embedding_dim == 8 and cfg.interaction == "cat"


def test_dim_override_keeps_dot_valid():
    cfg = config_from_args(build_parser().parse_args(["train", "--dim", "8"]))
    assert cfg.bottom_mlp[-1] == 8


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--bottom", "13-abc"], "--bottom"),
        (["train", "--top", "64-2"], "top_mlp"),
        (["train", "--bottom", "13-32-8"], "embedding_dim"),
    ],
)
def test_bad_architecture_exits_2_naming_the_option(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["train", "--steps", "0"], ["train", "--batch-size", "x"],
                                  ["train", "--preset", "nope"], ["train", "--pooling", "-1"]])  # fmt: skip
def test_bad_numbers_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert argv[1] in capsys.readouterr().err


def test_memory_check_refuses_a_preset_that_cannot_fit(capsys):
    assert main(["train", "--preset", "mlperf_v1", "--steps", "1"]) == 2
    assert "--max-rows" in capsys.readouterr().err


def test_doctor_json(capsys):
    r = run_json(capsys, ["doctor", "--json"])
    assert r["versions"]["torch"] and r["threads"] >= 1
    assert {"widgets", "offline_charts", "devices"} <= set(r)


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "recnotebooks", "doctor", "--json"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(out.stdout)["command"] == "doctor"


@pytest.mark.parametrize(
    "argv,name", [(["train", "--seed", "-1"], "--seed"), (["train", "--device", "gpu"], "device")]
)
def test_seed_and_device_errors_are_clean(capsys, argv, name):
    try:
        code = main(argv + ["--steps", "1", "--max-rows", "100"])
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert name in err and "Traceback" not in err
