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


SAMPLE = "datasets/criteo_sample.tsv.gz"  # 4,000 Criteo Kaggle lines shipped with the repository
CRITEO = ["train", "--data", SAMPLE, "--max-rows", "1000", "--batch-size", "256", "--eval-batches", "2",
          "--json"]  # fmt: skip


def test_train_on_criteo_files_holds_out_a_split(capsys):
    r = run_json(capsys, [*CRITEO, "--steps", "20"])  # 15 full batches of 256: 2 held out, 13 train
    assert r["preset"] == "criteo_kaggle" and r["config"]["num_tables"] == 26
    assert r["data"]["source"] == "criteo" and r["data"]["files"] == [SAMPLE]
    assert r["data"]["eval_fraction"] == 0.1 and r["data"]["lines_skipped"] == 0
    assert r["steps"] == 20 and r["batch_size"] == 256 and r["source"] == "measured"
    for key in ("samples_per_s", "auc", "logloss", "ne", "phases"):
        assert key in r, key
    assert 0 <= r["auc"] <= 1 and r["resumed_from"] is None


def test_checkpoint_and_resume_continue_the_same_run(capsys, tmp_path):
    straight = run_json(capsys, [*CRITEO, "--steps", "8"])
    ck = tmp_path / "run.pt"
    first = run_json(capsys, [*CRITEO, "--steps", "4", "--checkpoint", str(ck), "--checkpoint-every", "2"])
    assert first["checkpoint"] == str(ck) and ck.is_file()
    resumed = run_json(capsys, [*CRITEO, "--steps", "8", "--resume", str(ck)])
    assert resumed["resumed_at_step"] == 4 and resumed["steps"] == 8
    assert resumed["logloss"] == pytest.approx(straight["logloss"], rel=1e-5)
    assert resumed["auc"] == pytest.approx(straight["auc"], rel=1e-5)
    assert main([*CRITEO, "--steps", "4", "--resume", str(ck)]) == 2  # nothing left to do: said so
    assert "--steps 4 must exceed the 4 steps" in capsys.readouterr().err
    other = [*CRITEO, "--steps", "8", "--resume", str(ck), "--dense-optimizer", "adam"]
    assert main(other) == 2 and "dense optimizer 'adagrad'" in capsys.readouterr().err
    smaller = [*CRITEO, "--steps", "8", "--resume", str(ck), "--batch-size", "128"]  # other batches
    assert main(smaller) == 2 and "batch_size=256" in capsys.readouterr().err


def test_train_on_files_checks_the_model_shape(capsys):
    assert main(["train", "--data", SAMPLE, "--preset", "rm1", "--steps", "1"]) == 2
    assert "26 tables" in capsys.readouterr().err


# ----- DLRM-DCNv2 presets: their training settings, the cross layers' options ---------------------
def test_train_dcnv2_small_runs_with_its_presets_settings(capsys):
    r = run_json(capsys, ["train", "--preset", "dcnv2_small", "--steps", "4", "--eval-batches", "1",
                          "--json"])  # fmt: skip
    assert r["preset"] == "dcnv2_small" and r["batch_size"] == 512  # the preset's batch (PRESET_TRAINING)
    c = r["config"]
    assert c["interaction"] == "dcn" and c["dcn"] == "3 layers, rank 64" and c["lookups_per_sample"] == 214
    assert c["top_mlp"].startswith("432-")
    assert r["steps"] == 4 and len(r["losses"]) == 4 and 0 <= r["auc"] <= 1


def test_training_settings_come_from_the_command_line_then_the_preset_then_the_defaults():
    from recnotebooks.cli import TRAIN_DEFAULTS, training_settings

    p = build_parser()
    s = training_settings(p.parse_args(["train", "--preset", "mlperf_dcnv2"]))
    assert s == {"batch_size": 55_296, "sparse_optimizer": "adagrad", "sparse_lr": 0.004,
                 "dense_optimizer": "adagrad", "dense_lr": 0.004, "pooling": "fixed"}  # fmt: skip
    args = p.parse_args(["train", "--preset", "dcnv2_small", "--batch-size", "64", "--dense-lr", "0.1"])
    s = training_settings(args)
    assert (s["batch_size"], s["dense_lr"], s["sparse_lr"]) == (64, 0.1, 0.005)
    assert (args.batch_size, args.dense_lr) == (64, 0.1)  # every path of the command reads args
    assert training_settings(p.parse_args(["train"])) == {**TRAIN_DEFAULTS, "pooling": "fixed"}


def test_a_presets_optimizer_this_version_lacks_is_refused_naming_the_option(capsys, monkeypatch):
    import recnotebooks.config as config

    monkeypatch.setitem(
        config.PRESET_TRAINING, "tiny", {"sparse_optimizer": "lamb", "dense_optimizer": "adagrad"}
    )
    assert main(["train", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "preset tiny's sparse_optimizer 'lamb' is not one of" in err and "--sparse-optimizer NAME" in err


def test_help_lists_the_presets():
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()  # noqa: SLF001
    for name in ("tiny", "mlperf_dcnv2", "dcnv2_small", "mlperf_v1"):
        assert name in text
    assert "PRESET_TRAINING" in text and "--dcn-rank" in text


def test_interaction_overrides_and_the_cross_layers_options():
    p = build_parser()
    cfg = config_from_args(
        p.parse_args(["train", "--interaction", "dcn", "--dcn-rank", "16", "--dcn-layers", "2"])
    )
    assert (cfg.interaction, cfg.dcn_layers, cfg.dcn_rank) == ("dcn", 2, 16)
    cfg = config_from_args(p.parse_args(["train", "--preset", "dcnv2_small", "--interaction", "cat"]))
    assert cfg.interaction == "cat" and cfg.cross_parameters == 0  # the preset's cross layers go with it
    cfg = config_from_args(p.parse_args(["train", "--preset", "dcnv2_small", "--pooling", "2"]))
    assert all(t.pooling_factor == 2 for t in cfg.tables)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "--interaction", "dcn"], "dcn_rank must be in [1, 144]"),  # tiny: 16 + 8 x 16 wide
        (["train", "--dcn-rank", "16"], "dcn_rank=16 applies to interaction='dcn' only"),
        (["train", "--preset", "dcnv2_small", "--dcn-rank", "433"], "dcn_rank must be in [1, 432]"),
        (["train", "--preset", "dcnv2_small", "--pooling", "0.5"], "--pooling must be a whole number"),
        (["train", "--preset", "dcnv2_small", "--pooling", "2.5"], "got 2.5"),
    ],
)
def test_cross_layers_and_multi_hot_sizes_that_do_not_fit_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv", [["train", "--dcn-layers", "0"], ["train", "--dcn-layers", "65"], ["train", "--dcn-rank", "x"]]
)
def test_bad_cross_layer_numbers_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert "--dcn-" in capsys.readouterr().err
