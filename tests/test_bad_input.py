"""Bad input that used to leak (issue 9, item 7): each family is a clear TypeError/ValueError
(or, on the command line, exit status 2 and one line) naming the parameter, its value and
what is allowed; never a huge allocation, a deep torch traceback or a silently wrong result."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.checkpoint import add_checksum
from recnotebooks.cli import main
from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.data import SyntheticConfig, SyntheticCriteo
from recnotebooks.data.split import HeldOutSplit, is_held_out
from recnotebooks.nn import DLRM
from recnotebooks.nn.interaction import DotInteraction
from recnotebooks.perf.hardware import hardware
from recnotebooks.perf.memory import memory_report
from recnotebooks.perf.planner import plan_tables
from recnotebooks.sparse import JaggedBatch
from recnotebooks.train import TrainConfig, Trainer


def exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's own errors
        return int(e.code or 0)


def refuses(capsys, argv: list[str], *words: str) -> str:
    assert exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    last = err.strip().splitlines()[-1]  # argparse prints its usage first; the message is one line
    assert last.startswith("recnb "), err
    for w in words:
        assert w in last, (w, err)
    return last


# ----- sizes: the memory estimate counts what really gets allocated ---------------------------
@pytest.mark.parametrize("tables", [2, 7, 30])
def test_memory_estimate_counts_the_dot_interactions_buffers(tables):
    cfg = DLRMConfig(4, tuple(TableConfig(f"t{i}", 10) for i in range(tables)), 4, (8, 4), (8, 1))
    inter = DotInteraction(cfg.num_interaction_features)  # independent reference: the real buffers
    fp = cfg.memory_footprint()
    assert fp["interaction_buffers"] == sum(b.numel() * b.element_size() for b in inter.buffers())
    f = tables + 1
    assert fp["interaction_buffers"] == 3 * (f * (f - 1) // 2) * 8  # three int64 indices per pair
    with_batch = cfg.memory_footprint(batch_size=16)
    assert with_batch["interaction_buffers"] == fp["interaction_buffers"] + 16 * f * f * 4  # X X^T
    assert with_batch["batch_inputs"] == 16 * (8 * (tables + tables) + 4 * (4 + 1))
    assert with_batch["total"] == sum(v for k, v in with_batch.items() if k != "total")


def test_a_thousand_table_dot_interaction_is_small_and_right():
    """Its buffers grow as F^2 (pair indices), not F^4 (the 0/1 matrix it once kept: 2 TB here)."""
    inter = DotInteraction(1001)
    assert sum(b.numel() * b.element_size() for b in inter.buffers()) == 3 * 500_500 * 8
    x = torch.randn(2, 1001, 3, dtype=torch.float64)
    out = inter(x[:, 0], x[:, 1:])
    i, j = 700, 123  # pair (700, 123) sits at row-major position 700 * 699 / 2 + 123 of the triangle
    torch.testing.assert_close(out[:, 3 + 700 * 699 // 2 + 123], (x[:, i] * x[:, j]).sum(1))


def test_cat_interaction_has_no_selection_matrix():
    cfg = preset("rm1")
    assert cfg.memory_footprint()["interaction_buffers"] == 0


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--tables", "10000", "--rows", "10"], ["interaction_buffers", "GiB", "--tables"]),  # X X^T: 800 GB
        (["--tables", "20000"], ["--tables", "10000", "20000"]),
        (["--batch-size", str(10**12)], ["--batch-size", str(10**12)]),
        (["--pooling", "1e30"], ["--pooling", "1e+30"]),
        (["--pooling", "nan"], ["--pooling"]),
        (["--rows", str(2**60)], ["--rows"]),
        (["--dim", "0"], ["--dim", "[1, 16384]"]),
    ],
)
def test_train_refuses_sizes_that_cannot_be_allocated(capsys, argv, words):
    refuses(capsys, ["train", "--steps", "1", *argv], *words)


def test_synthetic_stream_refuses_a_batch_with_too_many_ids():
    cfg = preset("tiny").replace(tables=tuple(TableConfig(f"t{i}", 100, 1e6) for i in range(8)))
    with pytest.raises(ValueError, match="ids per batch"):
        SyntheticCriteo(cfg, 1024)


@pytest.mark.parametrize(
    "field,value,exc",
    [
        ("num_rows", 2.5, TypeError),
        ("num_rows", True, TypeError),
        ("num_rows", 2**60, ValueError),
        ("pooling_factor", 1e30, ValueError),
        ("pooling_factor", float("inf"), ValueError),
        ("pooling_factor", "2", TypeError),
    ],
)
def test_table_config_names_the_field(field, value, exc):
    kwargs = {"name": "t", "num_rows": 10, "pooling_factor": 1.0, field: value}
    with pytest.raises(exc, match=field):
        TableConfig(**kwargs)


# ----- options that were silently ignored -----------------------------------------------------
@pytest.mark.parametrize(
    "argv,words",
    [
        (["train", "--bottom", ""], ["--bottom", "''"]),
        (["train", "--top", ""], ["--top", "''"]),
        (["train", "--device", "tpu"], ["device", "'tpu'"]),
        (["train", "--eval-fraction", "0.2"], ["--eval-fraction", "--data"]),
        (["train", "--data", "datasets/criteo_sample.tsv.gz", "--zipf", "1.1"], ["--zipf", "synthetic"]),
        (["train", "--checkpoint-every", "5"], ["--checkpoint-every", "--checkpoint"]),
        (["train", "--data", "datasets/criteo_sample.tsv.gz", "--eval-fraction", "0.9"], ["--eval-fraction"]),
        (["train", "--data", "no/such/file.tsv"], ["--data", "no/such/file.tsv"]),
        (["train", "--data", "datasets/criteo_sample.tsv.gz", "--preset", "tiny"], ["--data", "26 tables"]),
        (["train", "--resume", "no/such.pt"], ["--resume", "no/such.pt"]),
        (["cost", "--cache-hit-rate", "0.5"], ["--cache-hit-rate", "--placement cache"]),
        (["cost", "--cache-hit-rate", "1.5", "--placement", "cache"], ["--cache-hit-rate", "[0, 1]"]),
        (["validate", "--device", "tpu"], ["device", "tpu"]),
        (["calibrate", "--device", "gpu"], ["device", "gpu"]),
        (["plan", "--nodes", "100000"], ["--nodes", "100000"]),
        (["plan", "--gpus", "8", "--nodes", "200"], ["--gpus x --nodes", "1,600"]),
    ],
)
def test_options_are_refused_not_ignored(capsys, argv, words):
    refuses(capsys, [*argv, "--steps", "1"] if argv[0] == "train" else argv, *words)


def test_validate_saved_refuses_a_corrupt_calibration(capsys, tmp_path, monkeypatch):
    path = tmp_path / "this_machine.json"
    path.write_text('{"hardware": {"name": 3}, "probe": [1, 2]}')
    monkeypatch.setenv("RECNB_CALIBRATION", str(path))
    with warnings.catch_warnings():  # the loader may warn that it ignores the file; the command refuses
        warnings.simplefilter("ignore")
        refuses(capsys, ["validate", "--saved", "--quick"], "--saved", str(path), "recnb calibrate")


def test_a_closed_pipe_ends_quietly():
    cmd = f"{sys.executable} -m recnotebooks plan --gpus 8 --nodes 32 | head -n 1"
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120, cwd=os.getcwd())
    assert out.stdout.startswith("plan (cost)")
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr


def test_remote_parameter_servers_are_counted_and_noted():
    tables = (TableConfig("huge", 10**13), *(TableConfig(f"C{i}", 1000) for i in range(25)))
    cfg = preset("criteo_kaggle").replace(tables=tables)
    hw = hardware("dgx_a100")
    plan = plan_tables(cfg, hw, 8, strategy="cost")
    assert any(s.placement == "remote" for s in plan.shards)
    mem = memory_report(cfg, hw, plan, 8192, gpus=8)
    huge = 10**13 * (cfg.embedding_dim * 4 + 4)  # weights + row-wise Adagrad state
    assert mem.remote_bytes == pytest.approx(huge)
    assert mem.parameter_servers == -(-huge // 256_000_000_000) and mem.notes
    assert "parameter servers" in mem.notes[0] and f"{mem.parameter_servers:,}" in mem.notes[0]


# ----- JaggedBatch ------------------------------------------------------------------------------
def test_lengths_whose_sum_wraps_int64_are_refused():
    big = 2**62  # four of them sum to 2**64 == 0 (mod 2**64)
    with pytest.raises(ValueError, match=r"lengths must each be <= len\(values\) = 0"):
        JaggedBatch(("a",), torch.zeros(0, dtype=torch.int64), torch.full((4,), big), 4)


@pytest.mark.parametrize("bad", [1.5, 2.0, True, "3", None])
def test_from_lists_refuses_non_integer_ids(bad):
    with pytest.raises(TypeError, match=r"features\['a'\]\[1\]\[0\]"):
        JaggedBatch.from_lists({"a": [[1], [bad]]})


def test_from_lists_checks_id_range_dtype_and_weights():
    with pytest.raises(ValueError, match="features"):
        JaggedBatch.from_lists({"a": [[2**31]]}, dtype=torch.int32)
    with pytest.raises(ValueError, match="dtype"):
        JaggedBatch.from_lists({"a": [[1]]}, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"weights\['a'\]\[0\]\[0\]"):
        JaggedBatch.from_lists({"a": [[1]]}, weights={"a": [[float("nan")]]})
    with pytest.raises(ValueError, match="keys of features"):
        JaggedBatch.from_lists({"a": [[1]]}, weights={"b": [[1.0]]})


# ----- checkpoints ------------------------------------------------------------------------------
def small_trainer(seed: int = 0, **tc) -> Trainer:
    cfg = preset("tiny").with_max_rows(200)
    conf = TrainConfig(steps=2, progress=False, eval_batches=1, **tc)
    train = SyntheticCriteo(cfg, 32, seed=0)
    return Trainer(DLRM(cfg, seed=seed), train, SyntheticCriteo(cfg, 32, split="eval"), conf, device="cpu")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tr = small_trainer()
    tr.fit()
    return tr.save(tmp_path_factory.mktemp("ckpt") / "good.pt")


def momentum(tr: Trainer) -> torch.Tensor:
    return tr.sparse_opt.state_dict().get("momentum", torch.zeros(0)).clone()  # SGD has none


def snapshot(tr: Trainer) -> tuple:
    weights = {k: v.clone() for k, v in tr.model.state_dict().items()}
    return weights, tr.step, list(tr.history), tr.train_data.state_dict(), momentum(tr)


def assert_unchanged(tr: Trainer, before: tuple) -> None:
    weights, step, history, data, saved_momentum = before
    for k, v in tr.model.state_dict().items():
        assert torch.equal(v, weights[k]), k
    assert (tr.step, tr.history, tr.train_data.state_dict()) == (step, history, data)
    assert torch.equal(momentum(tr), saved_momentum)


def damaged(saved, tmp_path, how: str):
    raw = saved.read_bytes()
    p = tmp_path / f"{how}.pt"
    if how == "empty":
        p.write_bytes(b"")
    elif how == "truncated":
        p.write_bytes(raw[: len(raw) // 2])
    elif how == "random":
        p.write_bytes(os.urandom(4096))
    elif how == "text":
        p.write_text("not a checkpoint\n")
    return p


@pytest.mark.parametrize("how", ["empty", "truncated", "random", "text"])
def test_unreadable_checkpoints_name_the_file(saved, tmp_path, how):
    tr = small_trainer(seed=1)
    before = snapshot(tr)
    p = damaged(saved, tmp_path, how)
    with pytest.raises(ValueError, match=str(p.name)):
        tr.load(p)
    assert_unchanged(tr, before)


def test_flipped_bytes_in_the_weights_are_detected(saved, tmp_path):
    raw = bytearray(saved.read_bytes())
    tr = small_trainer()
    tr.load(saved)  # a good file loads
    weight = tr.model.embeddings.weight.detach()
    needle = weight[50].numpy().tobytes()  # find the weights' bytes inside the file
    at = bytes(raw).find(needle)
    assert at > 0
    raw[at + 5] ^= 0x10
    p = tmp_path / "flipped.pt"
    p.write_bytes(bytes(raw))
    fresh = small_trainer(seed=1)
    before = snapshot(fresh)
    with pytest.raises(ValueError, match="corrupted.*SHA-256"):
        fresh.load(p)
    assert_unchanged(fresh, before)


def rewritten(saved, tmp_path, change) -> str:
    state = torch.load(saved, weights_only=True)
    change(state)
    p = tmp_path / "edited.pt"
    torch.save(add_checksum(state), p)  # a valid checksum: the field checks must catch it
    return p


@pytest.mark.parametrize(
    "change,match,trainer_kwargs",
    [
        (lambda s: s.update(step=-3), "step", {}),
        (lambda s: s.update(step=2.5), "step", {}),
        (lambda s: s.update(history="oops"), "history", {}),
        (lambda s: s["model"].pop(next(iter(s["model"]))), "lacks", {}),
        (lambda s: s["model"].update({"embeddings.weight": torch.zeros(3, 3)}), "shape", {}),
        (lambda s: s["sparse_optimizer"].update(momentum=torch.zeros(7)), "momentum", {}),
        (lambda s: s["sparse_optimizer"].update(eps=float("nan")), "eps", {}),
        (lambda s: s.update(data={"position": -1}), "data position", {}),
        (lambda s: s.update(config={"num_dense": "x"}), "config", {}),
        (lambda s: None, "dense optimizer 'adagrad'", {"dense_optimizer": "adam"}),
        (lambda s: None, "sparse optimizer 'rowwise_adagrad'", {"sparse_optimizer": "sgd"}),
        (lambda s: s.pop("dense_optimizer_kind"), "another optimizer", {"dense_optimizer": "adam"}),
    ],
)
def test_bad_fields_are_refused_and_nothing_is_loaded(saved, tmp_path, change, match, trainer_kwargs):
    p = rewritten(saved, tmp_path, change)
    tr = small_trainer(seed=1, **trainer_kwargs)
    before = snapshot(tr)
    with pytest.raises(ValueError, match=match) as e:
        tr.load(p)
    assert "edited.pt" in str(e.value)
    assert_unchanged(tr, before)


def test_a_checkpoint_without_checksum_loads_with_a_warning(saved, tmp_path):
    state = torch.load(saved, weights_only=True)
    state["format"] = "recnotebooks.checkpoint.v1"
    del state["checksum"]
    p = tmp_path / "v1.pt"
    torch.save(state, p)
    tr = small_trainer(seed=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tr.load(p)
    assert tr.step == 2 and any("checksum" in str(x.message) for x in w)


# ----- parameters named by the checks module ----------------------------------------------------
@pytest.mark.parametrize(
    "make,name,exc",
    [
        (lambda: TrainConfig(steps=True), "steps", TypeError),
        (lambda: TrainConfig(steps=2.0), "steps", TypeError),
        (lambda: TrainConfig(progress=1), "progress", TypeError),
        (lambda: TrainConfig(dense_lr=float("inf")), "dense_lr", ValueError),
        (lambda: SyntheticConfig(reuse_fraction=1.0), "reuse_fraction", ValueError),
        (lambda: SyntheticConfig(zipf_exponent=True), "zipf_exponent", TypeError),
        (lambda: SyntheticConfig(dense_log="yes"), "dense_log", TypeError),
        (lambda: preset("tiny").replace(interaction_self=1), "interaction_self", TypeError),
        (lambda: preset("tiny").memory_footprint(dense_optimizer="lamb"), "dense_optimizer", ValueError),
        (lambda: preset("nope"), "preset", ValueError),
        (lambda: small_trainer().fit(checkpoint_every=2), "checkpoint", ValueError),
        (lambda: HeldOutSplit([], 0.0), "eval_fraction", ValueError),
        (lambda: HeldOutSplit([], 0.1, "test"), "split", ValueError),
    ],
)
def test_parameters_are_named(make, name, exc):
    with pytest.raises(exc, match=name):
        make()


# ----- the held-out split -----------------------------------------------------------------------
@given(st.integers(1, 3000), st.floats(0.001, 0.999))
def test_held_out_share_is_exact_at_every_prefix(n, fraction):
    from fractions import Fraction

    f = Fraction(fraction).limit_denominator(1_000_000)
    held = sum(is_held_out(i, fraction) for i in range(n))
    assert held == -(-n * f.numerator // f.denominator)  # ceil(n * f), by a plain loop
    assert is_held_out(0, fraction)


def test_split_is_disjoint_complete_and_resumable():
    cfg = preset("tiny").with_max_rows(100)
    source = [SyntheticCriteo(cfg, 4).batch(i) for i in range(20)]
    train = HeldOutSplit(source, 0.25, "train", epochs=1)
    evals = HeldOutSplit(source, 0.25, "eval")
    ids = {id(b): i for i, b in enumerate(source)}
    got_train, got_eval = [ids[id(b)] for b in train], [ids[id(b)] for b in evals]
    assert sorted(got_train + got_eval) == list(range(20)) and len(got_eval) == 5
    assert got_eval == [0, 4, 8, 12, 16]
    again = HeldOutSplit(source, 0.25, "train", epochs=2)
    it = iter(again)
    first = [ids[id(next(it))] for _ in range(5)]
    resumed = HeldOutSplit(source, 0.25, "train", epochs=2)
    resumed.load_state_dict(again.state_dict())
    assert first == got_train[:5]
    assert [ids[id(b)] for b in resumed] == got_train[5:] + got_train  # rest of epoch 1, then epoch 2
    with pytest.raises(ValueError, match="eval_fraction"):
        HeldOutSplit(source, 0.5).load_state_dict(again.state_dict())


def test_checkpoint_paths_are_checked_before_training(capsys, tmp_path):
    run = ["train", "--steps", "1", "--max-rows", "100", "--checkpoint"]
    refuses(capsys, [*run, str(tmp_path)], "is a directory", "run.pt")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    refuses(capsys, [*run, str(blocker / "run.pt")], "cannot be written", "a_file")
    assert not list(tmp_path.glob("**/*.tmp"))


def test_trainer_names_bad_data_and_callbacks():
    cfg = preset("tiny").with_max_rows(100)
    with pytest.raises(TypeError, match="train_data"):
        Trainer(DLRM(cfg), 3, None, TrainConfig(progress=False), device="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"callbacks\[0\]"):
        Trainer(DLRM(cfg), [], None, TrainConfig(progress=False), device="cpu", callbacks=["log"])  # type: ignore[list-item]


def test_a_stream_refuses_another_streams_position():
    cfg = preset("tiny").with_max_rows(100)
    split = HeldOutSplit([SyntheticCriteo(cfg, 4).batch(0)], 0.5)
    with pytest.raises(ValueError, match="held_out_split"):
        SyntheticCriteo(cfg, 4).load_state_dict(split.state_dict())
    with pytest.raises(ValueError, match="HeldOutSplit"):
        split.load_state_dict(SyntheticCriteo(cfg, 4).state_dict())


def test_damaged_data_files_are_named(capsys, tmp_path):
    with open("datasets/criteo_sample.tsv.gz", "rb") as f:
        cut = tmp_path / "cut.tsv.gz"
        cut.write_bytes(f.read(20_000))  # a download that stopped half way
    run = ["train", "--max-rows", "100", "--batch-size", "32", "--steps", "200", "--data"]
    refuses(capsys, [*run, str(cut)], "cut.tsv.gz", "truncated gzip")
    refuses(capsys, [*run, str(tmp_path)], "--data", "not a regular file")
    text = tmp_path / "notes.txt"
    text.write_text("hello\nworld\n")
    refuses(capsys, [*run, str(text)], "2 of 2 lines of --data were malformed", "40 tab-separated fields")
