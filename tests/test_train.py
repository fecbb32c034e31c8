"""Trainer: learning, phase timings, checkpoint resume, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from _values import bad

from recnotebooks.config import preset
from recnotebooks.data import Batch, SyntheticCriteo
from recnotebooks.nn import DLRM
from recnotebooks.nn.dlrm import dense_modules
from recnotebooks.timing import PHASES
from recnotebooks.train import TrainConfig, Trainer


def make(cfg, model_seed=0, bs=64, **tc):
    train = SyntheticCriteo(cfg, bs, seed=0)
    evals = SyntheticCriteo(cfg, bs, seed=0, split="eval")
    conf = TrainConfig(progress=False, **tc)
    return Trainer(DLRM(cfg, seed=model_seed), train, evals, conf, device="cpu")


def small_cfg():
    return preset("tiny").with_max_rows(300)


@pytest.mark.slow
def test_tiny_dlrm_learns_the_teacher():
    """The learning test of issue 2: held-out AUC >= 0.75 (chance is 0.5)."""
    cfg = preset("tiny")
    tc = TrainConfig(steps=400, progress=False, eval_batches=10, time_phases=False)
    train = SyntheticCriteo(cfg, 1024, seed=0)
    evals = SyntheticCriteo(cfg, 1024, seed=0, split="eval")
    res = Trainer(DLRM(cfg, seed=0), train, evals, tc, device="cpu").fit()
    assert res.auc is not None and res.auc >= 0.75, res.auc
    assert res.ne is not None and res.ne < 0.95


def test_phase_table_and_throughput():
    tr = make(small_cfg(), steps=6, warmup_steps=2, eval_batches=2)
    res = tr.fit()
    assert res.steps == 6 and res.batch_size == 64
    assert set(res.phases) == set(PHASES)
    assert all(v >= 0 for v in res.phases.values()) and res.phases["backward"] > 0
    assert res.samples_per_s > 0 and math.isfinite(res.samples_per_s)
    rows = res.phase_table(config="tiny")
    assert {r["source"] for r in rows} == {"measured"}
    assert abs(sum(r["share"] for r in rows) - 1.0) < 1e-9
    assert 0.0 <= res.auc <= 1.0


@pytest.mark.parametrize(("sparse", "dense"), [("rowwise_adagrad", "adagrad"), ("adagrad", "adam")])
def test_resume_gives_same_continuation(tmp_path, sparse, dense):
    """A checkpoint (read back with ``weights_only=True``) carries the model and both optimizers'
    state: row-wise Adagrad's accumulator per row or exact Adagrad's per element, dense Adagrad's
    or Adam's; the resumed run continues as if never stopped."""
    cfg = small_cfg()
    opts = {"sparse_optimizer": sparse, "dense_optimizer": dense}
    straight = make(cfg, steps=8, eval_batches=1, **opts)
    straight.fit()

    first = make(cfg, steps=8, eval_batches=1, **opts)
    first.fit(steps=4)
    path = first.save(tmp_path / "ckpt.pt")
    saved = torch.load(path, weights_only=True)["sparse_optimizer"]
    assert saved["kind"] == sparse and saved["momentum"].shape == first.sparse_opt.momentum.shape

    resumed = make(
        cfg, model_seed=123, steps=8, eval_batches=1, **opts
    )  # different init: load must overwrite
    resumed.load(path)
    assert resumed.step == 4
    resumed.fit()
    for (n, a), (_, b) in zip(
        straight.model.state_dict().items(), resumed.model.state_dict().items(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=f"parameter {n} differs after resume")
    torch.testing.assert_close(straight.sparse_opt.momentum, resumed.sparse_opt.momentum)
    for p, q in zip(
        straight.dense_opt.param_groups[0]["params"], resumed.dense_opt.param_groups[0]["params"], strict=True
    ):
        for k, v in straight.dense_opt.state[p].items():  # Adam's two moments and step; Adagrad's sum
            torch.testing.assert_close(v, resumed.dense_opt.state[q][k], msg=f"dense optimizer {k}")


@pytest.mark.parametrize("sparse", ["sgd", "rowwise_adagrad", "adagrad"])
@pytest.mark.parametrize("dense", ["sgd", "adagrad", "adam"])
def test_the_trainer_builds_the_optimizers_it_is_named(sparse, dense):
    """Each name of ``config.SPARSE_OPTIMIZERS`` / ``DENSE_OPTIMIZERS`` gets its class, the
    configured learning rates, and the state the memory model counts (fp32 embedding state)."""
    from recnotebooks.config import state_floats_per_parameter, state_floats_per_row
    from recnotebooks.nn import ExactAdagrad, RowWiseAdagrad, SparseSGD

    cfg = small_cfg()
    tr = make(
        cfg,
        steps=1,
        eval_batches=0,
        sparse_optimizer=sparse,
        dense_optimizer=dense,
        sparse_lr=0.03,
        dense_lr=0.004,
    )
    want_sparse = {"sgd": SparseSGD, "rowwise_adagrad": RowWiseAdagrad, "adagrad": ExactAdagrad}[sparse]
    want_dense = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}[dense]
    assert type(tr.sparse_opt) is want_sparse and tr.sparse_opt.lr == 0.03
    assert type(tr.dense_opt) is want_dense and tr.dense_opt.param_groups[0]["lr"] == 0.004
    assert tr.sparse_opt.collection is tr.model.embeddings
    dense_params = list(tr.model.dense_parameters())
    assert [id(p) for p in tr.dense_opt.param_groups[0]["params"]] == [id(p) for p in dense_params]
    tr.fit()
    state = getattr(tr.sparse_opt, "momentum", torch.zeros(0))
    assert state.numel() == cfg.total_rows * state_floats_per_row(sparse, cfg.embedding_dim)
    assert state.dtype == torch.float32 or state.numel() == 0
    dense_state = sum(v.numel() for st in tr.dense_opt.state.values() for v in st.values() if v.dim() > 0)
    assert dense_state == cfg.dense_parameters * state_floats_per_parameter(dense)


def test_one_factory_builds_the_dense_optimizer_by_its_names():
    """``make_dense_optimizer`` knows exactly ``config.DENSE_OPTIMIZERS`` (another name raises
    naming ``dense_optimizer``); the distributed rank's old name is the same function."""
    from recnotebooks.config import DENSE_OPTIMIZERS
    from recnotebooks.distributed.training import dense_optimizer_for
    from recnotebooks.nn.optim import make_dense_optimizer

    want = {"sgd": torch.optim.SGD, "adagrad": torch.optim.Adagrad, "adam": torch.optim.Adam}
    assert set(want) == set(DENSE_OPTIMIZERS)
    for name in DENSE_OPTIMIZERS:
        p = torch.nn.Parameter(torch.zeros(2))
        opt = make_dense_optimizer(name, iter([p]), 0.25)  # an iterator: read once
        assert type(opt) is want[name] and opt.param_groups[0]["params"] == [p]
        assert opt.param_groups[0]["lr"] == 0.25
    with pytest.raises(ValueError, match="dense_optimizer"):
        make_dense_optimizer("rmsprop", [torch.nn.Parameter(torch.zeros(2))], 0.1)
    assert dense_optimizer_for is make_dense_optimizer


def test_exact_adagrad_embeddings_and_adam_dense_learn_the_teacher():
    """The optimizers of MLPerf's DLRM-DCNv2 (exact Adagrad on the tables; Adam here on the MLPs)
    learn the synthetic teacher: held-out AUC 0.72 after 150 steps of 256 here, where plain SGD
    reaches 0.57 (chance is 0.5), and the loss falls."""
    cfg = preset("tiny")
    tc = TrainConfig(
        steps=150,
        progress=False,
        eval_batches=5,
        time_phases=False,
        sparse_optimizer="adagrad",
        dense_optimizer="adam",
        sparse_lr=0.02,
        dense_lr=0.002,
    )
    train, evals = SyntheticCriteo(cfg, 256, seed=0), SyntheticCriteo(cfg, 256, seed=0, split="eval")
    res = Trainer(DLRM(cfg, seed=0), train, evals, tc, device="cpu").fit()
    assert res.auc is not None and res.auc >= 0.68, res.auc
    assert sum(res.losses[-10:]) / 10 < sum(res.losses[:10]) / 10 - 0.1


def test_checkpoint_rejects_other_config(tmp_path):
    a = make(small_cfg(), steps=1, eval_batches=1)
    a.fit()
    p = a.save(tmp_path / "a.pt")
    b = make(preset("tiny").with_max_rows(200), steps=1, eval_batches=1)
    with pytest.raises(ValueError, match="config"):
        b.load(p)
    with pytest.raises(FileNotFoundError, match="nope"):
        b.load(tmp_path / "nope.pt")


def test_nan_dense_features_raise_clear_error():
    cfg = small_cfg()
    good = SyntheticCriteo(cfg, 32, seed=0).batch(0)
    bad = Batch(torch.full_like(good.dense, float("nan")), good.sparse, good.labels)
    tr = Trainer(DLRM(cfg), [bad], None, TrainConfig(steps=1, progress=False), device="cpu")
    with pytest.raises(FloatingPointError, match="step 0"):
        tr.fit()


def test_running_out_of_data_is_reported():
    cfg = small_cfg()
    batch = SyntheticCriteo(cfg, 32, seed=0).batch(0)
    tr = Trainer(DLRM(cfg), [batch], None, TrainConfig(steps=3, progress=False), device="cpu")
    with pytest.raises(RuntimeError, match="ran out after 1 steps"):
        tr.fit()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"steps": 0}, "steps"),
        ({"sparse_optimizer": "adam"}, "sparse_optimizer"),
        ({"dense_optimizer": "lbfgs"}, "dense_optimizer"),
        ({"sparse_lr": -1.0}, "sparse_lr"),
        ({"dense_lr": float("nan")}, "dense_lr"),
        ({"warmup_steps": -1}, "warmup_steps"),
    ],
)
def test_train_config_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


def test_trainer_validation():
    with pytest.raises(TypeError, match="model"):
        Trainer(bad(torch.nn.Linear(2, 2)), [], None)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            Trainer(DLRM(small_cfg()), [], None, device="cuda")


def test_callbacks_receive_history():
    seen = []
    tr = make(small_cfg(), steps=4, log_every=2, eval_every=2, eval_batches=1)
    tr.callbacks.append(seen.append)
    tr.fit()
    assert [r["step"] for r in seen if "loss" in r] == [2.0, 4.0]
    assert any("auc" in r for r in seen)


@pytest.mark.gpu
def test_trains_on_cuda():
    cfg = small_cfg()
    train = SyntheticCriteo(cfg, 64, seed=0)
    evals = SyntheticCriteo(cfg, 64, seed=0, split="eval")
    res = Trainer(
        DLRM(cfg), train, evals, TrainConfig(steps=5, progress=False, eval_batches=2), device="cuda"
    ).fit()
    assert res.device.startswith("cuda") and res.phases["backward"] > 0


@pytest.mark.slow
def test_criteo_kaggle_size_model_trains():
    """33.8M rows (2.16 GB of fp32 tables) build, stream and train on a laptop-sized machine."""
    cfg = preset("criteo_kaggle")
    tr = Trainer(
        DLRM(cfg),
        SyntheticCriteo(cfg, 512, seed=0),
        SyntheticCriteo(cfg, 512, seed=0, split="eval"),
        TrainConfig(steps=3, warmup_steps=1, eval_batches=2, progress=False),
        device="cpu",
    )
    res = tr.fit()
    assert res.steps == 3 and math.isfinite(res.logloss)
    assert tr.model.embeddings.weight.shape == (33_762_577, 16)


def test_eval_every_without_eval_batches_is_rejected():
    with pytest.raises(ValueError, match="eval_batches"):
        TrainConfig(eval_every=5, eval_batches=0)


def test_eval_every_runs_between_log_points():
    tr = make(small_cfg(), steps=6, log_every=4, eval_every=3, eval_batches=1)
    tr.fit()
    assert [r["step"] for r in tr.history if "auc" in r][:2] == [3.0, 6.0]


def test_checkpoint_with_other_sparse_optimizer_is_rejected(tmp_path):
    a = make(small_cfg(), steps=1, eval_batches=1, sparse_optimizer="sgd")
    a.fit()
    p = a.save(tmp_path / "a.pt")
    b = make(small_cfg(), steps=1, eval_batches=1)
    with pytest.raises(ValueError, match="sparse optimizer 'sgd'"):
        b.load(p)


def test_single_class_eval_warns_instead_of_crashing():
    cfg = small_cfg()
    good = SyntheticCriteo(cfg, 16, seed=0).batch(0)
    ones = Batch(good.dense, good.sparse, torch.ones(16))
    tr = Trainer(
        DLRM(cfg), [good, good], [ones], TrainConfig(steps=1, progress=False, eval_batches=1), device="cpu"
    )
    with pytest.warns(RuntimeWarning, match="both classes"):
        res = tr.fit()
    assert res.auc is None and res.samples_per_s > 0


def test_plain_list_of_batches_reports_throughput():
    cfg = small_cfg()
    b = SyntheticCriteo(cfg, 16, seed=0).batch(0)
    res = Trainer(DLRM(cfg), [b] * 3, None, TrainConfig(steps=3, warmup_steps=1, progress=False),
                  device="cpu").fit()  # fmt: skip
    assert res.batch_size == 16 and res.samples_per_s > 0


@pytest.mark.parametrize("device", ["gpu", "tpu:0"])
def test_bad_device_is_named(device):
    with pytest.raises(ValueError, match="device"):
        Trainer(DLRM(small_cfg()), [], None, device=device)


def test_model_rejects_wrong_dense_dtype_and_labels_must_be_clicks():
    cfg = small_cfg()
    b = SyntheticCriteo(cfg, 4, seed=0).batch(0)
    with pytest.raises(ValueError, match="dense must be torch.float32"):
        DLRM(cfg)(b.dense.double(), b.sparse)
    with pytest.raises(TypeError, match="sparse must be a JaggedBatch"):
        DLRM(cfg)(b.dense, {"a": 1})
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        Batch(b.dense, b.sparse, torch.full((4,), 2.0))


def test_dense_modules_are_the_dlrms_own_without_its_tables() -> None:
    cfg = preset("tiny")
    model = DLRM(cfg, seed=3)
    bottom, interaction, top = dense_modules(cfg, seed=3)
    got = [*bottom.state_dict().items(), *interaction.state_dict().items(), *top.state_dict().items()]
    want = [*model.bottom_mlp.state_dict().items(), *model.interaction.state_dict().items(),
            *model.top_mlp.state_dict().items()]  # fmt: skip
    assert [k for k, _ in got] == [k for k, _ in want]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(got, want, strict=True))
    assert type(interaction) is type(model.interaction)
    other = dense_modules(cfg, seed=4)[0]
    assert not torch.equal(other[0].weight, bottom[0].weight)
    with pytest.raises(TypeError, match="config must be a DLRMConfig"):
        dense_modules(bad("tiny"))


def test_the_report_says_a_busy_machine_and_an_unreliable_measurement_first() -> None:
    """``recnb train`` (one process or several: both print :func:`report_lines`) names the threads
    the policy lowered to and why the numbers cannot be trusted, before the loss and eval lines."""
    from recnotebooks.run_report import report_lines

    base = {"losses": [0.7, 0.5], "auc": 0.7, "logloss": 0.5, "ne": 0.9, "threads": 2, "busy": "",
            "reliability": ""}  # fmt: skip
    assert [ln.split()[0] for ln in report_lines(base)] == ["loss", "eval"]
    busy = {**base, "threads": 1, "busy": "other programs kept 1.0 of 2 cores busy",
            "reliability": "its steps varied 3.0-fold"}  # fmt: skip
    lines = report_lines(busy)
    assert lines[0] == "  threads     1: other programs kept 1.0 of 2 cores busy"
    assert lines[1].startswith("  NOT RELIABLE: its steps varied 3.0-fold")
    assert [ln.split()[0] for ln in lines[2:]] == ["loss", "eval"]
