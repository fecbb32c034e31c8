"""Bad input that used to leak (issue 9, item 7): each family is a clear TypeError/ValueError
(or, on the command line, exit status 2 and one line) naming the parameter, its value and
what is allowed; never a huge allocation, a deep torch traceback or a silently wrong result."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import _values
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks import checks
from recnotebooks.cache import CacheConfig, CachedEmbeddingBagCollection
from recnotebooks.checkpoint import add_checksum, read_checkpoint
from recnotebooks.checks import MAX_STEPS, parse_float, parse_int
from recnotebooks.cli import main
from recnotebooks.config import (
    DLRMConfig,
    TableConfig,
    parse_mlp,
    preset,
    state_floats_per_parameter,
    state_floats_per_row,
)
from recnotebooks.data import SyntheticConfig, SyntheticCriteo
from recnotebooks.data.split import HeldOutSplit, is_held_out
from recnotebooks.distributed.launch import launch
from recnotebooks.distributed.training import train_local
from recnotebooks.distributed.twod import two_d_groups
from recnotebooks.measure import measure_step
from recnotebooks.measure.mixed_precision import compare_precision
from recnotebooks.nn import DLRM, EmbeddingBagCollection, ExactAdagrad, RowWiseAdagrad, SparseSGD
from recnotebooks.nn.interaction import DotInteraction
from recnotebooks.nn.mlp import MLP
from recnotebooks.nn.optim import make_sparse_optimizer
from recnotebooks.perf.cost import estimate
from recnotebooks.perf.hardware import FIELD_RANGES, HARDWARE, hardware, save_calibration
from recnotebooks.perf.job import job_cost
from recnotebooks.perf.memory import memory_footprint, memory_report
from recnotebooks.perf.planner import plan_tables, table_bytes
from recnotebooks.perf.scaleout import scale_out
from recnotebooks.plan import Plan, round_robin, single_device_plan
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
    fp = memory_footprint(cfg)
    assert fp["interaction_buffers"] == sum(b.numel() * b.element_size() for b in inter.buffers())
    f = tables + 1
    assert fp["interaction_buffers"] == 3 * (f * (f - 1) // 2) * 8  # three int64 indices per pair
    with_batch = memory_footprint(cfg, batch_size=16)
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
    assert memory_footprint(cfg)["interaction_buffers"] == 0


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
        (["validate", "--saved", "--repeats", "0"], ["--repeats", "0", "[1, 100]"]),
        (["validate", "--distributed", "--repeats", "2"], ["--repeats", "--distributed"]),
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
        (lambda s: s.update(step=10**30), "step", {}),
        (lambda s: s["sparse_optimizer"]["momentum"].__setitem__(0, float("inf")), "momentum", {}),
        (lambda s: s.update(data={"position": -1}), "data position", {}),
        (lambda s: s.update(config={"num_dense": "x"}), "config", {}),
        (lambda s: None, "dense optimizer 'adagrad'", {"dense_optimizer": "adam"}),
        (lambda s: None, "sparse optimizer 'rowwise_adagrad'", {"sparse_optimizer": "sgd"}),
        (
            lambda s: None,
            "sparse optimizer 'rowwise_adagrad' but this trainer uses 'adagrad'",
            {"sparse_optimizer": "adagrad"},
        ),  # the same name of state, another shape: refused by kind
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
        (lambda: memory_footprint(preset("tiny"), dense_optimizer="lamb"), "dense_optimizer", ValueError),
        (lambda: memory_footprint(preset("tiny").tables), "config", TypeError),
        (lambda: memory_footprint(preset("tiny"), embedding_bytes=0), "embedding_bytes", ValueError),
        (lambda: memory_footprint(preset("tiny"), embedding_bytes=2.0), "embedding_bytes", TypeError),
        (lambda: state_floats_per_row("adagrad", 0), "embedding_dim", ValueError),
        (lambda: state_floats_per_row("adagrad", float("nan")), "embedding_dim", ValueError),
        (lambda: preset("nope"), "preset", ValueError),
        (lambda: preset("tiny").embedding_bytes_per_sample(dtype_bytes=-4), "dtype_bytes", ValueError),
        (lambda: preset("tiny").embedding_bytes_per_sample(index_bytes=0), "index_bytes", ValueError),
        (lambda: preset("tiny").embedding_bytes_per_sample(dtype_bytes=4.0), "dtype_bytes", TypeError),
        (lambda: preset("tiny").mlp_layers("middle"), "which", ValueError),
        (lambda: small_trainer().fit(checkpoint_every=2), "checkpoint", ValueError),
        (lambda: HeldOutSplit([], 0.0), "eval_fraction", ValueError),
        (lambda: HeldOutSplit([], 0.1, "test"), "split", ValueError),
    ],
)
def test_parameters_are_named(make, name, exc):
    with pytest.raises(exc, match=name):
        make()


# ----- optimizer names: one list (recnotebooks.config), refused by name everywhere ---------------
_TINY, _A100 = preset("tiny"), hardware("dgx_a100")


def _tiny_collection() -> EmbeddingBagCollection:
    return EmbeddingBagCollection([TableConfig("t0", 5)], 2)


@pytest.mark.parametrize(
    "make",
    [
        lambda name: state_floats_per_row(name, 4),
        lambda name: memory_footprint(_TINY, sparse_optimizer=name),
        lambda name: make_sparse_optimizer(name, _tiny_collection(), 0.1),
        lambda name: TrainConfig(sparse_optimizer=name),
        lambda name: memory_report(_TINY, _A100, single_device_plan(_TINY), 64, sparse_optimizer=name),
        lambda name: estimate(_TINY, _A100, batch_size=64, sparse_optimizer=name),
        lambda name: plan_tables(_TINY, _A100, 2, sparse_optimizer=name),
        lambda name: table_bytes(_TINY, sparse_optimizer=name),
    ],
    ids=["state_floats_per_row", "memory_footprint", "make_sparse_optimizer", "TrainConfig", "memory_report",
         "estimate", "plan_tables", "table_bytes"],
)  # fmt: skip
@pytest.mark.parametrize("name", ["adam", "Adagrad", "exact_adagrad", "RowWise_Adagrad", None, 1])
def test_an_unknown_sparse_optimizer_is_refused_everywhere(make, name):
    """An optimizer whose state the memory model does not know (``adam``: dense only here) is
    refused by name, with the names allowed, wherever a sparse optimizer is named."""
    with pytest.raises(
        ValueError,
        match=r"(sparse_optimizer|name) must be one of \['sgd', 'rowwise_adagrad', 'adagrad'\], got",
    ):
        make(name)


@pytest.mark.parametrize(
    "make",
    [
        lambda name: state_floats_per_parameter(name),
        lambda name: memory_footprint(_TINY, dense_optimizer=name),
        lambda name: TrainConfig(dense_optimizer=name),
        lambda name: memory_report(_TINY, _A100, single_device_plan(_TINY), 64, dense_optimizer=name),
        lambda name: estimate(_TINY, _A100, batch_size=64, dense_optimizer=name),
    ],
    ids=["state_floats_per_parameter", "memory_footprint", "TrainConfig", "memory_report", "estimate"],
)  # fmt: skip
def test_an_unknown_dense_optimizer_is_refused_everywhere(make):
    with pytest.raises(
        ValueError, match=r"dense_optimizer must be one of \['sgd', 'adagrad', 'adam'\], got 'lamb'"
    ):
        make("lamb")


def test_the_optimizer_choices_on_the_command_line_are_the_librarys(capsys):
    allowed = "'sgd', 'rowwise_adagrad', 'adagrad'"
    refuses(capsys, ["train", "--sparse-optimizer", "adam"], "--sparse-optimizer", allowed)
    for command in ("cost", "plan"):
        refuses(capsys, [command, "--sparse-optimizer", "exact"], "--sparse-optimizer", allowed)
        refuses(
            capsys, [command, "--dense-optimizer", "lamb"], "--dense-optimizer", "'sgd', 'adagrad', 'adam'"
        )


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


def test_trainer_names_bad_data_and_callbacks() -> None:
    cfg = preset("tiny").with_max_rows(100)
    with pytest.raises(TypeError, match="train_data"):
        Trainer(DLRM(cfg), _values.bad(3), None, TrainConfig(progress=False), device="cpu")
    with pytest.raises(TypeError, match=r"callbacks\[0\]"):
        Trainer(
            DLRM(cfg), [], None, TrainConfig(progress=False), device="cpu", callbacks=[_values.bad("log")]
        )


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


# ===== issue 22, item 7: the remaining unclear inputs ===========================================
# One parametrized test per kind, over its Python entry points and its command-line options: each
# refusal names the parameter and the value, and comes before any allocation, process or step.
HUGE = 10**30
BIG_WORLD = 2**70
FULL_WIDTH = str.maketrans("0123456789.", "０１２３４５６７８９．")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present here")


def raises_naming(exc: type[Exception], make, *words: str) -> str:
    """``make()`` raises ``exc`` and its message holds every word; the message."""
    with pytest.raises(exc) as e:
        make()
    msg = str(e.value)
    for w in words:
        assert w in msg, (w, msg)
    return msg


def tiny_plan(world: int = 2):
    return round_robin(preset("tiny"), world)


def cached(device=None, staging_rows: int = 0, dim: int = 4) -> CachedEmbeddingBagCollection:
    cache = CacheConfig(capacity=5, staging_rows=staging_rows)
    return CachedEmbeddingBagCollection([TableConfig("t", 10)], dim, cache, device=device)


# ----- 1. step counts: refused above MAX_STEPS (10^9), never run for ever ------------------------
@pytest.mark.parametrize(
    "make,name,value",
    [
        (lambda: TrainConfig(steps=HUGE), "steps", HUGE),
        (lambda: TrainConfig(eval_batches=HUGE), "eval_batches", HUGE),
        (lambda: TrainConfig(warmup_steps=MAX_STEPS + 1), "warmup_steps", MAX_STEPS + 1),
        (lambda: small_trainer().fit(HUGE), "steps", HUGE),
        (lambda: small_trainer().evaluate(HUGE), "batches", HUGE),
        (lambda: measure_step(preset("tiny"), 8, min_steps=HUGE, max_steps=HUGE), "min_steps", HUGE),
        (lambda: compare_precision(preset("tiny"), steps=HUGE), "steps", HUGE),
        (lambda: train_local(preset("tiny"), tiny_plan(), 2, HUGE, 8), "steps", HUGE),
    ],
)
def test_huge_step_counts_are_refused(make, name, value):
    raises_naming(ValueError, make, name, str(value), ", 1000000000]")


def test_the_step_bound_itself_is_allowed():
    assert TrainConfig(steps=MAX_STEPS).steps == MAX_STEPS  # inclusive: good input is unchanged


@pytest.mark.parametrize(
    "argv,words",
    [
        (["train", "--steps", "1e30"], ["--steps", "'1e30'", "1000000000"]),
        (["train", "--steps", str(HUGE)], ["--steps", str(HUGE), "1000000000"]),
        (["train", "--eval-batches", str(HUGE)], ["--eval-batches", str(HUGE)]),
        (["train", "--checkpoint-every", str(HUGE)], ["--checkpoint-every", str(HUGE)]),
        (["train", "--world-size", "2", "--steps", str(HUGE)], ["--steps", str(HUGE)]),
        (["cache-sim", "--batch-size", str(HUGE)], ["--batch-size", str(HUGE)]),
    ],
)
def test_huge_step_counts_on_the_command_line(capsys, argv, words):
    refuses(capsys, argv, *words)


# ----- 2. digits that are not ASCII: int("５１２") is 512 to Python, a typo to us ---------------------
@pytest.mark.parametrize("spec", ["13-５１２-1", "13-²-1", "１３-512", "13-٥-1"])
def test_mlp_specs_take_ascii_digits_only(spec):
    raises_naming(ValueError, lambda: parse_mlp(spec, "--bottom"), "--bottom", repr(spec), "ASCII")


@given(st.integers(0, 10**12))
def test_typed_numbers_read_ascii_and_refuse_other_digits(n):
    assert parse_int("n", str(n)) == n and parse_float("x", f"{n}.5") == n + 0.5
    with pytest.raises(ValueError, match="ASCII"):
        parse_int("n", str(n).translate(FULL_WIDTH))
    with pytest.raises(ValueError, match="ASCII"):
        parse_float("x", f"{n}.5".translate(FULL_WIDTH))


@pytest.mark.parametrize(
    "argv,words",
    [
        (["train", "--bottom", "13-５１２-16"], ["--bottom", "ASCII"]),
        (["train", "--top", "２５６-1"], ["--top", "ASCII"]),
        (["train", "--pooling", "１.５"], ["--pooling", "ASCII"]),
        (["train", "--batch-size", "６４"], ["--batch-size", "'６４'", "ASCII"]),
        (["cost", "--gpus", "８"], ["--gpus", "'８'", "ASCII"]),
        (["cost", "--placement", "cache", "--cache-rows", "５"], ["--cache-rows", "'５'", "ASCII"]),
        (["cache-sim", "--rows", "１０００"], ["--rows", "ASCII"]),
        (["cache-sim", "--capacity", "０.５"], ["--capacity", "ASCII"]),
        (["cache-sim", "--alpha", "１.１"], ["--alpha", "ASCII"]),
    ],
)
def test_typed_numbers_with_other_digits_are_refused(capsys, argv, words):
    refuses(capsys, [*argv, "--steps", "1"] if argv[0] == "train" else argv, *words)


# ----- 3. a calibration path whose folder is a file (or that is a folder) ----------------------------
def test_save_calibration_names_a_path_under_a_file(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    target = blocker / "cal.json"
    hw = HARDWARE["this_machine"]
    raises_naming(ValueError, lambda: save_calibration(hw, None, target), "path", str(target), "is a file")
    raises_naming(ValueError, lambda: save_calibration(hw, None, tmp_path), "path", "is a directory")
    assert blocker.read_text() == "x" and not list(tmp_path.glob("**/*.tmp"))  # nothing written


@pytest.mark.parametrize("command", [["calibrate", "--quick"], ["validate", "--quick"]])
@pytest.mark.parametrize("where", ["under_a_file", "a_directory"])
def test_a_bad_calibration_path_is_refused_before_measuring(capsys, tmp_path, monkeypatch, command, where):
    import recnotebooks.commands.measure as cal

    monkeypatch.setattr(cal, "calibrate", lambda *a, **k: pytest.fail("calibrated before checking the path"))
    monkeypatch.setattr(
        cal, "calibrate_and_validate", lambda *a, **k: pytest.fail("calibrated before checking the path")
    )
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    path = blocker / "cal.json" if where == "under_a_file" else tmp_path
    monkeypatch.setenv("RECNB_CALIBRATION", str(path))
    words = ["is a file, not a folder", str(blocker)] if where == "under_a_file" else ["is a directory"]
    refuses(capsys, command, "RECNB_CALIBRATION", str(path), *words)


def test_validation_runs_refuse_bad_passes_and_budgets_before_measuring(monkeypatch):
    """``repeats`` and ``time_budget_s`` of validate and calibrate_and_validate are checked before
    anything is measured (``repeats=0`` used to reach an IndexError deep in the fit), and a
    fit of no rounds says what it needs."""
    import recnotebooks.measure.validate as val
    from recnotebooks.measure.calibrate import fit_calibration

    monkeypatch.setattr(val, "_pass", lambda *a, **k: pytest.fail("measured before checking"))
    monkeypatch.setattr(val, "calibration_round", lambda *a, **k: pytest.fail("calibrated before checking"))
    hw = HARDWARE["this_machine"]
    for run in (lambda **k: val.validate(hw, None, **k), val.calibrate_and_validate):
        raises_naming(ValueError, lambda run=run: run(repeats=0), "repeats", "0")
        raises_naming(ValueError, lambda run=run: run(time_budget_s=float("nan")), "time_budget_s", "nan")
        raises_naming(ValueError, lambda run=run: run(time_budget_s=0.0), "time_budget_s")
        raises_naming(TypeError, lambda run=run: run(repeats="3"), "repeats", "'3'")
    for bad in ([], None, [1]):
        raises_naming(ValueError, lambda bad=bad: fit_calibration(bad, "cpu"), "rounds", "calibration_round")
    # judge_interleaved reads rounds and passes already measured: as many of each, each pass over
    # the sweep, or it says which is wrong before fitting anything
    one_pass = [object()] * len(val.validation_sweep(quick=True))
    raises_naming(TypeError, lambda: val.judge_interleaved(7, [{}], [one_pass], quick=True), "dev", "7")
    raises_naming(
        TypeError, lambda: val.judge_interleaved("cpu", None, [one_pass], quick=True), "rounds", "None"
    )
    raises_naming(TypeError, lambda: val.judge_interleaved("cpu", [{}], "p", quick=True), "passes", "'p'")
    raises_naming(
        ValueError,
        lambda: val.judge_interleaved("cpu", [{}], [], quick=True),
        "passes",
        "as many as rounds (1)",
    )
    raises_naming(
        ValueError, lambda: val.judge_interleaved("cpu", [{}], [[1]], quick=True), "passes[0]", "7 configs"
    )


def test_loading_from_under_a_file_warns_and_uses_the_defaults(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv("RECNB_CALIBRATION", str(blocker / "cal.json"))
    with pytest.warns(UserWarning, match="is a file, not a folder"):
        assert hardware("this_machine") == HARDWARE["this_machine"]


# ----- 4. tables (and layers) that cannot fit: the bytes, before torch allocates -----------------
TERABYTE_TABLES = (TableConfig("a", 2**44), TableConfig("b", 2**44))


@pytest.mark.parametrize(
    "make,need",
    [
        (lambda: EmbeddingBagCollection([TableConfig("t", 2**40)], 64), 2**40 * 64 * 4),
        (lambda: EmbeddingBagCollection([TableConfig("t", 2**40)], 64, dtype=torch.float64), 2**40 * 64 * 8),
        (lambda: DLRM(preset("tiny").replace(tables=TERABYTE_TABLES)), None),
        (lambda: MLP(2**20, [2**20]), (2**20 + 1) * 2**20 * 4),
        (lambda: cached(staging_rows=2**40, dim=2**10), (5 + 2**40) * 2**10 * 4),
    ],
)
def test_what_cannot_fit_is_refused_with_the_bytes(make, need):
    if need is None:  # the whole DLRM: its tables and its MLPs
        cfg = preset("tiny").replace(tables=TERABYTE_TABLES)
        need = (cfg.sparse_parameters + cfg.dense_parameters) * 4
    msg = raises_naming(ValueError, make, "does not fit", f"{need:,} bytes", "available")
    assert "TiB" in msg or "PiB" in msg


def test_the_fit_check_compares_with_the_memory_available(monkeypatch):
    monkeypatch.setattr(checks, "available_memory_bytes", lambda device="cpu": 1000)
    assert EmbeddingBagCollection([TableConfig("t", 62)], 4).weight.numel() == 248  # 992 bytes: fits
    make = lambda: EmbeddingBagCollection([TableConfig("t", 63)], 4)  # noqa: E731
    raises_naming(ValueError, make, "1,008 bytes", "1,000 bytes")
    monkeypatch.setattr(checks, "available_memory_bytes", lambda device="cpu": None)  # unknown: allowed
    assert make().total_rows == 63


@pytest.mark.parametrize("where", ["plain", "cached"])
def test_exact_adagrad_state_that_cannot_fit_is_refused_before_it_is_allocated(monkeypatch, where):
    """Exact Adagrad's state is a second fp32 table: with room for the weight but not for it, the
    optimizer is refused with the bytes it needs (the cached collection's host copy of it too)."""
    tables = [TableConfig("t", 60)]
    cached_coll = CachedEmbeddingBagCollection(tables, 4, CacheConfig("lru", capacity=8))
    coll = EmbeddingBagCollection(tables, 4) if where == "plain" else cached_coll
    monkeypatch.setattr(checks, "available_memory_bytes", lambda device="cpu": 900)
    assert RowWiseAdagrad(coll, 0.1).momentum.numel() in (60, 8)  # 240 bytes: fits
    raises_naming(ValueError, lambda: ExactAdagrad(coll, 0.1), "'momentum'", "960 bytes", "900 bytes")


# ----- 5. device strings that are not a device, and CUDA without it --------------------------------
BUILDERS = [
    lambda d: DLRM(preset("tiny").with_max_rows(10), device=d),
    lambda d: EmbeddingBagCollection([TableConfig("t", 10)], 4, device=d),
    lambda d: MLP(4, [4], device=d),
    lambda d: cached(device=d),
    lambda d: Trainer(DLRM(preset("tiny").with_max_rows(10)), [], device=d),
    lambda d: SyntheticCriteo(preset("tiny"), 4, device=d),
    lambda d: read_checkpoint("no_such.pt", device=d),  # the device is named, not a "damaged file"
]


@pytest.mark.parametrize("bad", ["cudaa", "gpu", "tpu", "cuda:x", 3])
@pytest.mark.parametrize("build", BUILDERS)
def test_bad_device_strings_are_named(build, bad):
    raises_naming(
        ValueError if isinstance(bad, str) else TypeError, lambda: build(bad), "device", str(bad), "'cpu'"
    )


@no_cuda
@pytest.mark.parametrize("build", BUILDERS)
def test_cuda_without_cuda_is_refused(build):
    raises_naming(ValueError, lambda: build("cuda:0"), "device", "cuda", "CUDA is not available")


@pytest.mark.parametrize(
    "argv,words",
    [
        (["train", "--device", "cudaa"], ["device", "'cudaa'"]),
        pytest.param(["train", "--device", "cuda"], ["device", "CUDA is not available"], marks=no_cuda),
        (["calibrate", "--device", "cudaa"], ["--device", "cudaa"]),
        pytest.param(["validate", "--device", "cuda"], ["--device", "CUDA is not available"], marks=no_cuda),
    ],
)
def test_bad_devices_on_the_command_line(capsys, argv, words):
    refuses(capsys, [*argv, "--steps", "1"] if argv[0] == "train" else argv, *words)


# ----- 6. optimizer settings that are not finite -----------------------------------------------
def collection() -> EmbeddingBagCollection:
    return EmbeddingBagCollection([TableConfig("t", 10)], 4)


@pytest.mark.parametrize(
    "kwargs,name,value,exc",
    [
        ({"initial_accumulator_value": float("inf")}, "initial_accumulator_value", "inf", ValueError),
        ({"initial_accumulator_value": float("nan")}, "initial_accumulator_value", "nan", ValueError),
        ({"initial_accumulator_value": -1.0}, "initial_accumulator_value", "-1.0", ValueError),
        ({"initial_accumulator_value": "0.1"}, "initial_accumulator_value", "'0.1'", TypeError),
        ({"eps": float("inf")}, "eps", "inf", ValueError),
        ({"eps": True}, "eps", "True", TypeError),
        ({"eps": 0.0, "kind": "exact"}, "eps", "0.0", ValueError),
        (
            {"initial_accumulator_value": float("inf"), "kind": "exact"},
            "initial_accumulator_value",
            "inf",
            ValueError,
        ),
        ({"lr": float("nan")}, "lr", "nan", ValueError),
        ({"lr": float("inf"), "kind": "sgd"}, "lr", "inf", ValueError),
        ({"sparse_lr": float("-inf"), "kind": "config"}, "sparse_lr", "-inf", ValueError),
    ],
)
def test_non_finite_optimizer_settings_are_named(kwargs, name, value, exc):
    kwargs = dict(kwargs)
    kind = kwargs.pop("kind", "adagrad")
    lr = kwargs.pop("lr", 0.1)
    make = {
        "adagrad": lambda: RowWiseAdagrad(collection(), lr, **kwargs),
        "exact": lambda: ExactAdagrad(collection(), lr, **kwargs),
        "sgd": lambda: SparseSGD(collection(), lr),
        "config": lambda: TrainConfig(**kwargs),
    }[kind]
    raises_naming(exc, make, name, value)


@pytest.mark.parametrize("adagrad", [RowWiseAdagrad, ExactAdagrad])
@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0])
def test_an_optimizer_state_with_bad_accumulators_is_refused_whole(bad, adagrad):
    opt = adagrad(collection(), 0.1, initial_accumulator_value=0.5)
    state = opt.state_dict()
    state["momentum"] = state["momentum"].clone()
    state["momentum"][3] = bad
    state["lr"] = 0.2
    raises_naming(ValueError, lambda: opt.load_state_dict(state), "momentum", str(bad))
    assert opt.lr == 0.1 and bool((opt.momentum == 0.5).all())  # nothing half-applied


def test_an_accumulator_of_the_other_adagrad_is_refused_by_shape():
    """Both Adagrads name their state ``momentum``; row-wise's ``(rows,)`` is not exact's
    ``(rows, dim)``, nor the reverse: refused with both shapes, nothing applied."""
    row_wise, exact = RowWiseAdagrad(collection(), 0.1), ExactAdagrad(collection(), 0.1)
    for dst, src in ((exact, row_wise), (row_wise, exact)):
        state = {**src.state_dict(), "kind": dst.kind}
        before = dst.momentum.clone()
        raises_naming(
            ValueError,
            lambda d=dst, s=state: d.load_state_dict(s),
            "momentum",
            str(tuple(dst.momentum.shape)),
        )
        assert torch.equal(dst.momentum, before)


# ----- 7. a hardware preset field of the wrong type -------------------------------------------
@pytest.mark.parametrize(
    "field,value",
    [
        ("hbm_bw", "3.35e12"), ("hbm_bw", True), ("nic_bw", None), ("llc_speedup", True),
        ("llc_speedup", "3"), ("host_pools_embeddings", "yes"), ("host_pools_embeddings", 1),
        ("peak_flops", [1e12]),
        ("devices", 8.0), ("name", 5), ("kind", ["gpu"]), ("description", 5), ("sources", "datasheet"),
        ("sharded_op_overhead_s", "1e-5"),
    ],
)  # fmt: skip
def test_hardware_fields_of_the_wrong_type_are_named(field, value):
    make = lambda: hardware("dgx_h100").replace(**{field: value})  # noqa: E731
    raises_naming(TypeError, make, field, checks.show(value))


def test_a_hardware_name_that_is_not_a_name() -> None:
    raises_naming(TypeError, lambda: hardware(_values.bad(["dgx_h100"])), "hardware", "['dgx_h100']")


# ----- 8. numbers so small (or large) that the model's results become infinite --------------------
@pytest.mark.parametrize(
    "field,value",
    [
        ("hbm_bw", 1e-300), ("nic_bw", 1e-300), ("intra_node_bw", 5e-324), ("host_link_bw", 1e-300),
        ("host_mem_bw", 1e-300), ("sort_rate", 1e-300), ("hbm_bytes", 1e-300), ("host_mem_bytes", 1e-300),
        ("gemm_max_efficiency", 1e-300), ("gather_efficiency", 1e-300), ("power_w", 1e308),
        ("price_per_hour", 1e308), ("collective_latency_s", 1e300), ("hbm_bw", 1e308),
    ],
)  # fmt: skip
def test_hardware_numbers_outside_their_range_are_named(field, value):
    lo, hi, lo_open = FIELD_RANGES[field]
    allowed = checks.describe_range(lo, hi, lo_open=lo_open)
    raises_naming(
        ValueError, lambda: hardware("dgx_h100").replace(**{field: value}), field, repr(value), allowed
    )


def test_a_tiny_peak_flops_is_named():
    make = lambda: hardware("dgx_h100").replace(peak_flops={"fp32": 1e-300})  # noqa: E731
    raises_naming(ValueError, make, "peak_flops['fp32']", "1e-300")


def corner(field: str, pick: bool) -> float:
    """An end of ``field``'s range (an open or zero low end: a tiny positive number)."""
    lo, hi, lo_open = FIELD_RANGES[field]
    return hi if pick else (1e-12 if lo_open or lo == 0 else lo)


CORNER_FIELDS = ("hbm_bw", "nic_bw", "intra_node_bw", "host_link_bw", "gemm_max_efficiency", "gemm_half_dim",
                 "power_w", "collective_latency_s")  # fmt: skip


@given(
    st.lists(st.booleans(), min_size=len(CORNER_FIELDS), max_size=len(CORNER_FIELDS)), st.sampled_from([1, 8])
)
def test_any_hardware_inside_the_ranges_gives_finite_results(picks, gpus):
    """The ranges' promise, checked at their corners: every modeled figure is a finite number."""
    import math

    hw = hardware("dgx_h100").replace(**{f: corner(f, p) for f, p in zip(CORNER_FIELDS, picks, strict=True)})
    r = estimate(preset("rm1"), hw, batch_size=2**20, gpus=gpus, nodes=2)
    figures = [r.step_time, r.step_time_overlap, r.throughput, r.busy_fraction, r.flops_efficiency,
               r.hbm_utilisation, r.joules_per_million_samples]  # fmt: skip
    assert all(math.isfinite(v) for v in figures), figures


@pytest.mark.parametrize(
    "name,value",
    [("step_time_s", 1e-320), ("step_time_s", 1e300), ("samples", 1e308), ("epochs", 1e300),
     ("price_per_hour", 1e308), ("power_w", 1e308), ("devices", BIG_WORLD), ("servers", BIG_WORLD)],
)  # fmt: skip
def test_job_totals_that_would_overflow_are_refused(name, value):
    kwargs = {"samples": 1e6, "batch_size": 1024, "step_time_s": 0.01, "devices": 8, "price_per_hour": 2.0,
              "power_w": 5000.0, name: value}  # fmt: skip
    raises_naming(ValueError, lambda: job_cost(**kwargs), name, repr(value))


# ----- 9. world sizes that overflow -----------------------------------------------------------
@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: estimate(preset("rm1"), "dgx_h100", batch_size=2**40, gpus=8, nodes=BIG_WORLD), "nodes"),
        (lambda: plan_tables(preset("rm1"), "dgx_h100", BIG_WORLD), "world_size"),
        (lambda: Plan(BIG_WORLD, ()), "world_size"),
        (lambda: scale_out(preset("rm1"), devices=[1, BIG_WORLD]), "devices[1]"),
        (lambda: round_robin(preset("tiny"), BIG_WORLD, "data_parallel"), "world_size"),
        (lambda: launch(os.getpid, BIG_WORLD), "world_size"),
        (lambda: train_local(preset("tiny"), tiny_plan(), BIG_WORLD, 1, 8), "world_size"),
        (lambda: two_d_groups(BIG_WORLD, 1), "world_size"),
    ],
)
def test_world_sizes_that_overflow_are_refused(make, name):
    raises_naming(ValueError, make, name, str(BIG_WORLD))


def test_a_launch_timeout_that_overflows_is_refused():
    raises_naming(ValueError, lambda: launch(os.getpid, 1, timeout_s=1e300), "timeout_s", "1e+300")


@pytest.mark.parametrize(
    "env,words",
    [
        ({"WORLD_SIZE": str(BIG_WORLD), "RANK": "0"}, ["WORLD_SIZE", str(BIG_WORLD), "4096"]),
        ({"WORLD_SIZE": "２", "RANK": "0"}, ["WORLD_SIZE", "ASCII"]),
        ({"WORLD_SIZE": "2", "RANK": "2"}, ["RANK", "[0, 1]"]),
        ({"WORLD_SIZE": "", "RANK": "0"}, ["WORLD_SIZE", "''"]),
    ],
)
def test_torchrun_world_sizes_are_checked(capsys, monkeypatch, env, words):
    for k, v in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", **env}.items():
        monkeypatch.setenv(k, v)
    refuses(capsys, ["train", "--distributed", "--steps", "1"], "--distributed", *words)


@pytest.mark.parametrize(
    "argv,words",
    [
        (["train", "--world-size", str(BIG_WORLD)], ["--world-size", str(BIG_WORLD)]),
        (["plan", "--nodes", str(BIG_WORLD)], ["--nodes", str(BIG_WORLD)]),
        (["cost", "--gpus", str(BIG_WORLD)], ["--gpus", str(BIG_WORLD)]),
    ],
)
def test_world_sizes_that_overflow_on_the_command_line(capsys, argv, words):
    refuses(capsys, [*argv, "--steps", "1"] if argv[0] == "train" else argv, *words)
