"""The command line's home (recnotebooks.commands): the arguments resolved once into a frozen
settings value that leaves ``args`` as parsed, and one printer for every command's report."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from recnotebooks.commands import main
from recnotebooks.commands import settings as settings_module
from recnotebooks.commands.parser import build_parser
from recnotebooks.commands.report import Report, emit, printer
from recnotebooks.commands.settings import (
    CacheSimSettings,
    MeasureSettings,
    ModelSettings,
    TrainSettings,
    resolve,
)
from recnotebooks.config import PRESET_TRAINING, preset

TINY_RUN = ["train", "--preset", "tiny", "--steps", "2", "--batch-size", "32", "--max-rows", "200",
            "--eval-batches", "1", "--device", "cpu", "--json"]  # fmt: skip


def test_train_settings_are_frozen_and_leave_args_as_parsed() -> None:
    args = build_parser().parse_args(["train", "--preset", "dcnv2_small", "--dense-lr", "0.1"])
    parsed = dict(vars(args))
    s = resolve(args)
    assert vars(args) == parsed  # the options left out are still None: nothing filled in
    assert args.batch_size is None and args.sparse_optimizer is None
    assert isinstance(s, TrainSettings)
    source = PRESET_TRAINING["dcnv2_small"]  # the preset's own, the command line's over it
    assert (s.batch_size, s.sparse_optimizer, s.sparse_lr) == (
        source["batch_size"],
        source["sparse_optimizer"],
        source["sparse_lr"],
    )
    assert s.dense_lr == 0.1 and s.config == preset("dcnv2_small") and s.preset == "dcnv2_small"
    field = "batch_size"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(s, field, 1)


def test_every_command_resolves_to_its_frozen_settings() -> None:
    p = build_parser()
    cost = resolve(p.parse_args(["cost", "--gpus", "4", "--nodes", "2", "--cache-rows", "0.5"]))
    assert isinstance(cost, ModelSettings) and (cost.gpus, cost.nodes) == (4, 2) and cost.cache_rows == 0.5
    assert cost.implementation == "torchrec" and resolve(p.parse_args(["plan"])).strategy == "cost"
    sim = resolve(p.parse_args(["cache-sim", "--capacity", "100", "--curve"]))
    assert isinstance(sim, CacheSimSettings) and (sim.capacity, sim.curve, sim.json) == (100, True, False)
    assert resolve(p.parse_args(["validate", "--quick"])) == MeasureSettings("validate", "cpu", quick=True)
    assert resolve(p.parse_args(["validate", "--repeats", "1"])).repeats == 1
    field = "json"
    for s in (cost, sim):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(s, field, True)


def test_a_train_run_resolves_its_settings_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[argparse.Namespace] = []
    original = settings_module.training_settings

    def counted(args: argparse.Namespace) -> dict[str, object]:
        calls.append(args)
        return original(args)

    monkeypatch.setattr(settings_module, "training_settings", counted)
    assert main(TINY_RUN) == 0
    assert len(calls) == 1
    r = json.loads(capsys.readouterr().out)
    assert (r["steps"], r["batch_size"], r["preset"]) == (2, 32, "tiny")


def test_settings_refuse_what_a_run_cannot_use_before_it_runs() -> None:
    p = build_parser()
    for argv, words in (
        (["train", "--eval-fraction", "0.1"], "--eval-fraction needs --data PATH"),
        (["train", "--world-size", "2", "--dtype", "bf16"], "--dtype bf16 applies to single-process"),
        (["train", "--pooling", "1.5"], "--pooling must be a whole number"),
    ):
        with pytest.raises(settings_module.CLIError, match=words):
            resolve(p.parse_args(argv))


def test_one_printer_prints_text_or_json(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report({"n": 3, "what": "rows"}, printer(lambda r: [f"{r['n']} {r['what']}", "  - done"]))
    assert emit(report, as_json=False) == 0
    assert capsys.readouterr().out == "3 rows\n  - done\n"
    assert emit(report, as_json=True) == 0
    assert json.loads(capsys.readouterr().out) == {"n": 3, "what": "rows"}
