"""Sharded checkpoints on real gloo ranks (:mod:`recnotebooks.distributed.checkpoint`): saved by 4
ranks under one plan, resumed by 2 under another and by one process, a single-process checkpoint
resumed by 2 ranks; each continues as the uninterrupted run (losses per step, weights within 1e-6);
all or nothing (an interrupted save leaves the last checkpoint loadable); damaged, foreign and
missing checkpoints refused with the parameter named; ``torchrun --max-restarts`` with an injected
fault resumes from the last save and ends as the uninterrupted run."""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _ckpt_workers import runs_in_turn
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks import cli
from recnotebooks.commands import train as train_command
from recnotebooks.commands.settings import train_settings
from recnotebooks.config import Workload
from recnotebooks.data.criteo import CriteoReader
from recnotebooks.data.split import HeldOutSplit
from recnotebooks.data.synthetic import SyntheticConfig
from recnotebooks.distributed import training
from recnotebooks.distributed.checkpoint import MANIFEST, fold_pieces, read_manifest, read_single, resolve
from recnotebooks.distributed.launch import launch
from recnotebooks.distributed.rank_data import CriteoFiles, data_state, train_batches
from recnotebooks.distributed.resume import check_resume
from recnotebooks.distributed.training import (
    FAULT_AT_STEP,
    FAULT_RANK,
    train_local,
)
from recnotebooks.plan import round_robin
from recnotebooks.train import config_to_dict

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "datasets" / "criteo_sample.tsv.gz")  # 4,000 Criteo Kaggle lines
STEPS, HALF, BATCH, SEED, EVAL = 6, 3, 128, 1, 2
CONFIG = cli.config_from_args(cli.build_parser().parse_args(["train", "--preset", "tiny"]))
#: row-wise Adagrad on the tables, Adam on the MLPs (both optimizers' states travel)
WORKLOAD = Workload(CONFIG, BATCH, sparse_optimizer="rowwise_adagrad", dense_optimizer="adam")
CLI = ["--preset", "tiny", "--batch-size", str(BATCH), "--seed", str(SEED), "--dense-optimizer", "adam"]


def _ranks(world: int, sharding: str, steps: int, **options: object):
    """``train_local`` of :data:`WORKLOAD` on ``world`` ranks sharded ``sharding``."""
    plan = round_robin(CONFIG, world, sharding)
    return train_local(WORKLOAD, plan, world, steps, seed=SEED, timeout_s=300.0, **options)


def _one_process(steps: int, *extra: str):
    """The single-process ``recnb train`` trainer (built by the CLI), trained to ``steps``."""
    args = cli.build_parser().parse_args(["train", *CLI, "--steps", str(steps), "--device", "cpu", *extra])
    trainer, _ = train_command.trainer(train_settings(args), torch.device("cpu"))
    trainer.config.progress, trainer.config.log_every = False, 1
    return trainer


def _weights(state: dict) -> dict[str, torch.Tensor]:
    return {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: float = 1e-6) -> None:
    assert set(a) == set(b)
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=0, atol=tol), (k, float((a[k] - b[k]).abs().max()))


#: Exact Adagrad on the tables, Adagrad on the MLPs: exact under every plan (column-wise too).
EXACT = WORKLOAD.replace(sparse_optimizer="adagrad", dense_optimizer="adagrad")
#: The 2-rank runs, one launch (:func:`_ckpt_workers.runs_in_turn`), after the 4-rank run.
TWO_RANK_RUNS = [
    (
        "ref",
        WORKLOAD,
        "table_wise",
        STEPS,
        {"eval_batches": EVAL, "checkpoint": "{tmp}/ref"},
    ),  # uninterrupted
    (
        "two",
        WORKLOAD,
        "table_wise",
        STEPS,
        {"eval_batches": EVAL, "resume": "{tmp}/four", "checkpoint": "{tmp}/two"},
    ),
    ("back", WORKLOAD, "row_wise", STEPS, {"resume": "{tmp}/one.pt", "checkpoint": "{tmp}/back"}),
    ("xref", EXACT, "row_wise", STEPS, {"checkpoint": "{tmp}/xref"}),  # uninterrupted
    ("cw", EXACT, "column_wise", HALF, {"checkpoint": "{tmp}/cw"}),  # stopped after 3 steps
    ("dp3", EXACT, "data_parallel", HALF, {"resume": "{tmp}/cw", "checkpoint": "{tmp}/dp3"}),  # loaded, saved
    (
        "dp",
        EXACT,
        "data_parallel",
        STEPS,
        {"resume": "{tmp}/cw", "checkpoint": "{tmp}/dp"},
    ),  # loaded, trained on
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, object]:
    """One process stopped after :data:`HALF` steps (its checkpoint file), 4 ranks row-wise stopped
    there (their sharded checkpoint), then :data:`TWO_RANK_RUNS` on 2 ranks: rank 0's results."""
    tmp = tmp_path_factory.mktemp("ckpt")
    first = _one_process(HALF)
    first.fit(HALF, checkpoint=tmp / "one.pt")
    four = _ranks(4, "row_wise", HALF, checkpoint=str(tmp / "four"))
    res = launch(runs_in_turn, 2, TWO_RANK_RUNS, str(tmp), SEED, timeout_s=600.0).values[0]
    return {"tmp": tmp, "four": four, **res, "ref_state": read_single(tmp / "ref")}


def test_four_ranks_reshard_onto_two_and_continue_as_if_never_stopped(runs) -> None:
    tmp, ref, two = runs["tmp"], runs["ref"], runs["two"]
    info = read_manifest(tmp / "four")
    assert (info["step"], info["world_size"]) == (HALF, 4)
    assert info["losses"] == pytest.approx(ref.losses[:HALF], abs=1e-6)
    assert two.start_step == HALF and len(two.losses) == STEPS - HALF
    assert two.losses == pytest.approx(ref.losses[HALF:], abs=1e-6)
    assert two.metrics["auc"] == pytest.approx(ref.metrics["auc"], abs=1e-6)
    state = read_single(tmp / "two")
    _close(_weights(state["model"]), _weights(runs["ref_state"]["model"]))
    momentum = runs["ref_state"]["sparse_optimizer"]["momentum"]
    _close({"m": state["sparse_optimizer"]["momentum"]}, {"m": momentum})
    assert read_manifest(tmp / "two")["losses"] == pytest.approx(ref.losses, abs=1e-6)


def test_sharded_checkpoint_loads_in_one_process_and_back(runs) -> None:
    """4 ranks -> one process (``recnb train --resume DIR``) continues as the uninterrupted 2-rank
    run; one process's checkpoint file -> 2 ranks row-wise continues as the uninterrupted
    single-process run (one process and 2 ranks from the start differ by up to 5e-6 in the weights
    after 6 steps: they sum gradients in another order; each comparison here is with the run that
    shares its first part)."""
    tmp, ref = runs["tmp"], runs["ref"]
    one = _one_process(STEPS, "--resume", str(tmp / "four"))
    assert one.step == HALF
    res = one.fit(STEPS)
    assert res.losses == pytest.approx(ref.losses[HALF:], abs=1e-6)
    _close(_weights(one.model.state_dict()), _weights(runs["ref_state"]["model"]))
    full = _one_process(STEPS)
    whole = full.fit(STEPS)
    back = runs["back"]
    assert back.start_step == HALF
    assert back.losses == pytest.approx(whole.losses[HALF:], abs=1e-6)
    _close(_weights(read_single(tmp / "back")["model"]), _weights(full.model.state_dict()))


def test_exact_adagrad_column_wise_reshards_to_data_parallel_bit_for_bit(runs) -> None:
    """Exact Adagrad on the tables, Adagrad on the MLPs: 3 steps column-wise on 2 ranks, loaded
    data-parallel (every replica reads every table's column blocks) and saved again without a step:
    the same state, bit for bit; trained on, the same losses as the uninterrupted row-wise run. The
    weights stay within 1e-4 of that run: exact Adagrad's first step of an element is
    ``lr * g / |g|``, so an element whose gradient is near zero turns the plans' different sums of
    the same gradients into visible differences (measured 1.2e-5 after 6 steps; the same plan
    restarted is within 1e-6: the torchrun test)."""
    tmp = runs["tmp"]
    ref, first, again, rest = runs["xref"], runs["cw"], runs["dp3"], runs["dp"]
    assert (again.start_step, again.losses, rest.start_step) == (HALF, [], HALF)
    saved, reloaded = read_single(tmp / "cw"), read_single(tmp / "dp3")
    assert read_manifest(tmp / "cw")["pieces"]["C1"] == [[0, 8], [8, 16]]  # two column pieces
    for part in ("model", "sparse_optimizer"):
        _close(_weights(saved[part]), _weights(reloaded[part]), tol=0.0)
    for i, state in saved["dense_optimizer"]["state"].items():
        _close(_weights(state), _weights(reloaded["dense_optimizer"]["state"][i]), tol=0.0)
    assert saved["sparse_optimizer"]["momentum"].shape == (CONFIG.total_rows, CONFIG.embedding_dim)
    assert first.losses + rest.losses == pytest.approx(ref.losses, abs=1e-6)
    uninterrupted, resumed = read_single(tmp / "xref"), read_single(tmp / "dp")
    _close(_weights(uninterrupted["model"]), _weights(resumed["model"]), tol=1e-4)


def test_an_interrupted_save_leaves_the_last_checkpoint_loadable(runs, tmp_path) -> None:
    src = runs["tmp"] / "four"
    ckpt = tmp_path / "c"
    shutil.copytree(src, ckpt)
    # a save that died while the ranks wrote: its folder is half written, the checkpoint untouched
    shutil.copytree(src, tmp_path / "c.tmp")
    victim = sorted((tmp_path / "c.tmp").glob("*.distcp"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    (tmp_path / "c.tmp" / MANIFEST).unlink()
    assert read_single(ckpt)["step"] == HALF
    # a save that died between its two renames: the last checkpoint is DIR.old, and loads
    ckpt.rename(tmp_path / "c.old")
    assert resolve(ckpt) == tmp_path / "c.old"
    assert read_single(ckpt)["step"] == HALF


@pytest.mark.parametrize("damage", ["truncate", "flip", "drop", "manifest"])
def test_a_damaged_checkpoint_is_refused_naming_it(runs, tmp_path, damage) -> None:
    ckpt = tmp_path / "c"
    shutil.copytree(runs["tmp"] / "four", ckpt)
    shard = sorted(ckpt.glob("*.distcp"))[-1]
    data = shard.read_bytes()
    if damage == "truncate":
        shard.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        shard.write_bytes(data[:-9] + bytes([data[-9] ^ 1]) + data[-8:])
    elif damage == "drop":
        shard.unlink()
    else:
        (ckpt / MANIFEST).write_text("{not json")
    match = {"truncate": "corrupted", "flip": "corrupted", "drop": "incomplete", "manifest": "cannot be read"}
    with pytest.raises(ValueError, match=match[damage]) as info:
        read_single(ckpt)
    assert str(ckpt) in str(info.value)


@pytest.fixture
def no_launch(monkeypatch):
    """Fails the test if a process would start."""
    monkeypatch.setattr(training, "launch", lambda *a, **k: pytest.fail("a process was started"))


def test_a_corrupt_shard_is_refused_before_any_rank_starts(runs, tmp_path, capsys, no_launch) -> None:
    """Local ranks' checkpoint is checked (every file's checksum) before any process starts (under
    torchrun each rank checks a share); the command names --resume's checkpoint, nothing is written."""
    ckpt = tmp_path / "c"
    shutil.copytree(runs["tmp"] / "four", ckpt)
    shard = sorted(ckpt.glob("*.distcp"))[0]
    shard.write_bytes(shard.read_bytes()[:-1])
    argv = ["train", "--world-size", "2", *CLI, "--steps", str(STEPS), "--resume", str(ckpt),
            "--checkpoint", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "corrupted" in err and str(ckpt) in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_bad_checkpoint_options_are_refused_before_any_process_starts(
    runs, tmp_path, capsys, no_launch
) -> None:
    base = ["train", "--world-size", "2", *CLI, "--steps", str(STEPS)]
    four = str(runs["tmp"] / "four")
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    cases = [
        (["--resume", str(tmp_path / "nothing")], "--resume", "does not exist"),
        (["--resume", str(other)], "--resume", "holds no sharded checkpoint"),
        (["--checkpoint", str(other)], "--checkpoint", "never replaced"),
        (["--checkpoint", str(blocker)], "--checkpoint", "is a file"),
        (["--checkpoint", str(blocker / "c")], "--checkpoint", "cannot be written"),
        (["--resume", four, "--steps", str(HALF)], "--steps", "must exceed the 3 steps"),
        (
            ["--resume", four, "--max-rows", "100"],
            "another model or table layout",
            "tables: checkpoint rows [1000, 5000",
        ),
        (["--resume", four, "--sparse-optimizer", "adagrad"], "sparse_optimizer", "rowwise_adagrad"),
    ]
    if Path("/sys").is_dir():  # sysfs: no new folders, even for root
        cases.append((["--checkpoint", "/sys/recnb-ckpt/c"], "--checkpoint", "cannot be written"))
    if os.geteuid() != 0:  # root writes through a read-only folder's permissions
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        cases.append((["--checkpoint", str(ro / "c")], "--checkpoint", "cannot be written"))
    for extra, *words in cases:
        assert cli.main([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert all(w in err for w in words), (extra, err)
    assert (other / "notes.txt").read_text() == "mine" and sorted(p.name for p in other.iterdir()) == [
        "notes.txt"
    ]


def test_max_restarts_without_a_checkpoint_is_refused(monkeypatch, capsys) -> None:
    env = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": "1", "TORCHELASTIC_MAX_RESTARTS": "3"}  # fmt: skip
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert cli.main(["train", "--distributed", *CLI, "--steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "--max-restarts 3" in err and "--checkpoint DIR" in err


@settings(max_examples=25, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 15), min_size=0, max_size=4, unique=True),
    merge=st.integers(0, 4),
    rows=st.integers(1, 4),
)
def test_folding_row_wise_accumulators_is_their_column_weighted_mean(cuts, merge, rows) -> None:
    """A column piece made of whole saved pieces gets ``sum(width * accumulator) / its width``
    (a naive loop over its columns: the accumulator the piece would hold, a mean of squares)."""
    bounds = [0, *sorted(cuts), 16]
    pieces = [[a, b] for a, b in zip(bounds, bounds[1:], strict=False)]
    saved = torch.rand(rows, len(pieces), dtype=torch.float32)
    first = min(merge, len(pieces) - 1)
    lo, hi = pieces[0][0], pieces[first][1]  # the union of the first pieces
    per_column = [saved[:, next(i for i, (a, b) in enumerate(pieces) if a <= c < b)] for c in range(lo, hi)]
    naive = torch.stack(per_column, 1).double().mean(1).float()
    assert torch.allclose(fold_pieces(saved, pieces, (lo, hi)), naive, rtol=1e-6, atol=0)


def _torchrun(tmp: Path, fault_at: int | None) -> tuple[subprocess.CompletedProcess, dict]:
    """``recnb train --distributed`` under ``torchrun --standalone --max-restarts 1`` on 2 local
    ranks, checkpointing every 2 steps; with ``fault_at`` the last rank dies after that step on the
    first attempt (:data:`~recnotebooks.distributed.training.FAULT_AT_STEP`). Rank 0's report."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    env.pop(FAULT_AT_STEP, None)
    if fault_at is not None:
        env |= {FAULT_AT_STEP: str(fault_at), FAULT_RANK: "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", "1", "--monitor-interval", "0.5", "--local-ranks-filter", "0",
           "-m", "recnotebooks", "train", "--distributed", *CLI, "--steps", str(STEPS),
           "--eval-batches", str(EVAL), "--checkpoint", str(tmp / "ckpt"), "--checkpoint-every", "2",
           "--json"]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
    return done, json.loads(out[out.index("{") : out.rindex("}") + 1])


def test_torchrun_restarts_a_failed_rank_from_the_last_checkpoint(runs, tmp_path) -> None:
    done, report = _torchrun(tmp_path, fault_at=3)
    # the fault fired: torchrun reports the faulted rank's exit code, or the survivor's word that it
    # lost that rank there (distributed.peers; whichever rank torchrun saw fail first)
    fired = ("exitcode: 17", "exitcode  : 17", "rank 1 of 2 was lost at step 3")
    assert any(f in done.stderr for f in fired), done.stderr[-3000:]
    assert report["resumed_at_step"] == 2  # the restart resumed from the save of step 2
    assert report["losses"] == pytest.approx(runs["ref"].losses[2:], abs=1e-6)
    assert report["auc"] == pytest.approx(runs["ref"].metrics["auc"], abs=1e-6)
    state = read_single(tmp_path / "ckpt")
    assert state["step"] == STEPS
    _close(_weights(state["model"]), _weights(runs["ref_state"]["model"]))


def test_a_criteo_run_resumes_at_its_data_position() -> None:
    """On ``--data`` files a checkpoint's data position is what the single-process run's split
    records (files, held-out fraction, batch size, position): the ranks resume reading the batch
    after it; a position or files that do not match are refused, naming what differs."""
    cfg = cli.config_from_args(
        cli.build_parser().parse_args(["train", "--max-rows", "1000", "--data", SAMPLE])
    )
    workload, files = Workload(cfg, 256), CriteoFiles((SAMPLE,), 0.25)
    whole = list(itertools.islice(train_batches(workload, files, 0, SyntheticConfig())[0], 4))
    later = list(itertools.islice(train_batches(workload, files, 0, SyntheticConfig(), 2)[0], 2))
    assert torch.equal(later[0].dense, whole[2].dense) and torch.equal(later[1].labels, whole[3].labels)
    one = HeldOutSplit(CriteoReader([SAMPLE], cfg, 256, drop_last=True), 0.25, "train")
    steps = iter(one)
    next(steps), next(steps)  # the single-process run after 2 steps
    state = data_state(workload, files, 0, 2)
    data_at = functools.partial(data_state, workload, files, 0)
    assert state == one.state_dict()
    kinds = {"sparse_optimizer": {"kind": "rowwise_adagrad"}, "dense_optimizer": {"kind": "adagrad"}}
    info = {"path": "c", "config": config_to_dict(cfg), "step": 2, "data": state, **kinds}
    assert check_resume(info, workload, 6, data_at) == 2
    synthetic = {"kind": "synthetic_criteo", "position": 2, "seed": 0, "split": "train"}
    bad_states = [
        (state | {"position": 3}, "not its step 2"),
        (state | {"eval_fraction": 0.1}, "eval_fraction"),
        (synthetic, "was trained on"),
    ]
    for bad, words in bad_states:
        with pytest.raises(ValueError, match=words):
            check_resume({**info, "data": bad}, workload, 6, data_at)


def test_a_resumed_runs_lines_count_the_steps_it_trained() -> None:
    """After ``--resume`` at step 400 of 500 the report says 100 steps (401-500), not 500."""
    from recnotebooks.commands.train import _steps_run

    assert _steps_run({"steps": 500, "resumed_at_step": 400}) == "100 steps (401-500)"
    assert _steps_run({"steps": 500, "resumed_at_step": None}) == "500 steps"
    assert _steps_run({"steps": 500}) == "500 steps"
