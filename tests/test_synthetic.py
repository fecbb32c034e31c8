"""Tests for recnotebooks.data.skew and recnotebooks.data.synthetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _values import bad
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.config import DLRMConfig, TableConfig, preset
from recnotebooks.data.batch import Batch
from recnotebooks.data.skew import (
    FLOAT_MOD_MAX,
    ZipfSampler,
    affine_mod,
    fit_zipf_exponent,
    hash32,
    scatter_ids,
    scatter_params,
    zipf_ranks,
)
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.sparse import JaggedBatch


def cfg(*tables: tuple[int, float], num_dense: int = 13) -> DLRMConfig:
    ts = tuple(TableConfig(f"t{i}", rows, pf) for i, (rows, pf) in enumerate(tables))
    return DLRMConfig(num_dense, ts, 8, (16, 8), (8, 1))


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Rank (Mann-Whitney) AUC."""
    ranks = torch.empty_like(scores, dtype=torch.float64)
    ranks[torch.argsort(scores)] = torch.arange(1, len(scores) + 1, dtype=torch.float64)
    pos = labels > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def batches_equal(a: Batch, b: Batch) -> bool:
    return (
        torch.equal(a.dense, b.dense)
        and torch.equal(a.labels, b.labels)
        and torch.equal(a.sparse.values, b.sparse.values)
        and torch.equal(a.sparse.lengths, b.sparse.lengths)
    )


# ----- skew ------------------------------------------------------------------------------
def _hash32_ref(v: int) -> int:
    x = v & 0xFFFFFFFF
    for _ in range(2):
        x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def test_hash32_matches_pure_python_reference() -> None:
    x = torch.randint(-(2**31), 2**31, (2000,), generator=gen(), dtype=torch.int64).to(torch.int32)
    got = [v & 0xFFFFFFFF for v in hash32(x).tolist()]
    assert got == [_hash32_ref(v) for v in x.tolist()]


@given(st.integers(1, 10**7), st.floats(0.05, 3.0), st.integers(0, 2**31))
def test_zipf_ranks_in_range(n_rows: int, exponent: float, seed: int) -> None:
    r = zipf_ranks(n_rows, exponent, 500, gen(seed))
    assert r.dtype == torch.int64 and r.shape == (500,)
    assert int(r.min()) >= 0 and int(r.max()) < n_rows


@pytest.mark.parametrize("exponent", [0.6, 1.0, 1.3])
def test_zipf_matches_exact_probabilities(exponent: float) -> None:
    n, size = 50_000, 400_000
    counts = torch.bincount(zipf_ranks(n, exponent, size, gen(1)), minlength=n).double().numpy()
    p = np.arange(1, n + 1, dtype=np.float64) ** -exponent
    p /= p.sum()
    edges = [0, 1, 2, 5, 20, 100, 1000, 10_000, n]  # head, guide-table region and tail
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        expect = p[lo:hi].sum() * size
        assert abs(counts[lo:hi].sum() - expect) < 5 * math.sqrt(expect) + 1, (lo, hi)
    assert ZipfSampler(exponent).mass(n) == pytest.approx(
        (np.arange(1, n + 1.0) ** -exponent).sum(), rel=1e-9
    )


def test_zipf_huge_table_uses_the_whole_support() -> None:
    n = 40_000_000
    r = zipf_ranks(n, 1.0, 200_000, gen(2))
    assert int(r.max()) < n and int(r.max()) > n // 2
    frac = float((r >= 1_000_000).double().mean())  # P = ln(40) / H(40M) for exponent 1
    assert frac == pytest.approx(math.log(40) / (math.log(n) + 0.5772), abs=0.01)


@pytest.mark.parametrize("exponent", [0.8, 1.0, 1.2])
def test_fit_zipf_exponent_recovers_exponent(exponent: float) -> None:
    ids = zipf_ranks(100_000, exponent, 500_000, gen(3))
    fitted = fit_zipf_exponent(torch.bincount(ids, minlength=100_000))
    assert fitted == pytest.approx(exponent, rel=0.1)
    seen = torch.bincount(ids)
    assert fit_zipf_exponent(seen[seen > 0].numpy(), n_rows=100_000) == pytest.approx(fitted, rel=1e-6)


def test_fit_zipf_exponent_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="counts"):
        fit_zipf_exponent(np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="counts"):
        fit_zipf_exponent(np.zeros(5))
    with pytest.raises(ValueError, match="n_rows"):
        fit_zipf_exponent(np.array([3, 2, 1]), n_rows=2)


@given(st.integers(1, 3000), st.integers(0, 2**40))
def test_scatter_ids_is_a_bijection(n_rows: int, salt: int) -> None:
    ids = scatter_ids(torch.arange(n_rows), n_rows, salt)
    assert torch.equal(torch.sort(ids).values, torch.arange(n_rows))


@given(st.integers(2**31 + 1, 2**32), st.integers(0, 2**40))
def test_affine_mod_beyond_2_31_matches_python(n: int, salt: int) -> None:
    a, b = scatter_params(n, salt)
    r = torch.randint(0, n, (64,), generator=gen(salt % 1000))
    assert affine_mod(r, a, b, n).tolist() == [(a * v + b) % n for v in r.tolist()]
    small = r % FLOAT_MOD_MAX
    assert affine_mod(small.double(), 12345, 7, FLOAT_MOD_MAX).long().tolist() == [
        (12345 * v + 7) % FLOAT_MOD_MAX for v in small.tolist()
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_rows": 0}, "n_rows"),
        ({"n_rows": 2**33}, "n_rows"),
        ({"exponent": 0.0}, "exponent"),
        ({"exponent": float("nan")}, "exponent"),
        ({"size": -1}, "size"),
    ],
)
def test_zipf_ranks_rejects_bad_input(kwargs: dict, match: str) -> None:
    args = {"n_rows": 10, "exponent": 1.0, "size": 5} | kwargs
    with pytest.raises(ValueError, match=match):
        zipf_ranks(**args)


# ----- synthetic stream ------------------------------------------------------------------
SMALL = cfg((1, 2.0), (3, 1.0), (10_000_000, 3.0), (5000, 1.0))


STREAM = SyntheticCriteo(SMALL, 32, SyntheticConfig(pooling="poisson"), seed=11)


@given(st.integers(0, 10**9))
def test_batches_are_deterministic_and_distinct(i: int) -> None:
    b = STREAM.batch(i)
    assert batches_equal(b, STREAM.batch(i))
    assert not torch.equal(b.sparse.values, STREAM.batch(i + 1).sparse.values)


@pytest.mark.parametrize("seed", [0, 11, 2**40])
def test_new_instances_reproduce_batches(seed: int) -> None:
    a = SyntheticCriteo(SMALL, 32, SyntheticConfig(pooling="poisson"), seed=seed)
    b = SyntheticCriteo(SMALL, 32, SyntheticConfig(pooling="poisson"), seed=seed)
    assert batches_equal(a.batch(7), b.batch(7))
    assert seed != 11 or batches_equal(a.batch(3), STREAM.batch(3))


def test_random_access_equals_iteration_and_resume() -> None:
    s = SyntheticCriteo(SMALL, 16, start=5, num_batches=6)
    it = iter(s)
    first = [next(it) for _ in range(3)]
    assert s.position == 8 and s.state_dict()["position"] == 8
    state = s.state_dict()
    resumed = SyntheticCriteo(SMALL, 16, start=5, num_batches=6)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == 3 and len(resumed) == 6 and resumed.position == 11
    for k, b in enumerate(first + rest):
        assert batches_equal(b, s.batch(5 + k))
    assert len(list(resumed)) == 6  # every other iter() is a new pass from start
    assert batches_equal(next(iter(s)), s.batch(5)) and s.position == 6
    with pytest.raises(ValueError, match="seed"):
        SyntheticCriteo(SMALL, 16, seed=1).load_state_dict(state)
    with pytest.raises(TypeError, match="infinite"):
        len(SyntheticCriteo(SMALL, 16))


def test_train_and_eval_differ_but_share_the_teacher() -> None:
    c = preset("tiny")
    train, ev = SyntheticCriteo(c, 256, seed=3), SyntheticCriteo(c, 512, seed=3, split="eval")
    bt, be = train.batch(0), ev.batch(0)
    assert not torch.equal(bt.sparse.values[:256], be.sparse.values[:256])
    assert torch.equal(train.teacher_logits(be), ev.teacher_logits(be))
    assert torch.equal(train.teacher_logits(bt), ev.teacher_logits(bt))
    other = SyntheticCriteo(c, 256, seed=4)
    assert not torch.allclose(train.teacher_logits(bt), other.teacher_logits(bt))


@pytest.mark.parametrize("pooling", ["fixed", "uniform", "poisson"])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_batches_are_valid_with_ids_in_range(pooling: str, index_dtype: torch.dtype) -> None:
    data = SyntheticConfig(pooling=pooling, zipf_exponent=(0.7, 1.0, 1.2, 2.0))
    s = SyntheticCriteo(SMALL, 300, data, index_dtype=index_dtype)
    for i in range(3):
        b = s.batch(i)
        assert isinstance(b.sparse, JaggedBatch) and b.sparse.keys == SMALL.table_names
        assert b.sparse.values.dtype == index_dtype and b.sparse.lengths.dtype == index_dtype
        assert b.dense.shape == (300, 13) and b.dense.dtype == torch.float32 and bool((b.dense >= 0).all())
        assert b.labels.dtype == torch.float32 and set(b.labels.unique().tolist()) <= {0.0, 1.0}
        for t in SMALL.tables:
            v, _ = b.sparse[t.name]
            assert v.numel() == 0 or (int(v.min()) >= 0 and int(v.max()) < t.num_rows)


def test_huge_tables_use_the_integer_path() -> None:
    c = cfg((2**31, 2.0), (40_000_000, 1.0))
    for dt, rows in ((torch.int64, 2**32), (torch.int32, 2**31)):
        big = cfg((rows, 2.0), (40_000_000, 1.0))
        b = SyntheticCriteo(big, 64, index_dtype=dt).batch(1)
        v, _ = b.sparse["t0"]
        assert int(v.min()) >= 0 and int(v.max()) < rows
    with pytest.raises(ValueError, match="num_rows"):
        SyntheticCriteo(cfg((2**32, 1.0)), 8, index_dtype=torch.int32)
    assert SyntheticCriteo(c, 8).batch(0).sparse.values.numel() == 8 * 3


@pytest.mark.parametrize("pooling", ["fixed", "uniform", "poisson"])
def test_pooling_mean_matches_pooling_factor(pooling: str) -> None:
    c = cfg((1000, 1), (1000, 7.3), (1000, 20), (1000, 0))  # ints too
    s = SyntheticCriteo(c, 2000, SyntheticConfig(pooling=pooling))
    lengths = s.batch(0).sparse.lengths.view(4, 2000).double()
    means = lengths.mean(1).tolist()
    expected = [1.0, 7.0 if pooling == "fixed" else 7.3, 20.0, 0.0]
    for m, e in zip(means, expected, strict=True):
        assert m == pytest.approx(e, abs=0.05 * e + 0.01)
    if pooling == "fixed":
        assert lengths.std(1).max() == 0


@pytest.mark.parametrize(("rate", "noise"), [(0.25, 0.0), (0.1, 0.05), (0.6, 0.2)])
def test_positive_rate_hits_target(rate: float, noise: float) -> None:
    s = SyntheticCriteo(preset("tiny"), 2048, SyntheticConfig(positive_rate=rate, label_noise=noise), seed=9)
    labels = torch.cat([s.batch(i).labels for i in range(4)])
    assert float(labels.mean()) == pytest.approx(rate, abs=0.03)


@pytest.mark.parametrize("exponent", [0.8, 1.0, 1.2])
def test_stream_ids_fit_requested_zipf_exponent(exponent: float) -> None:
    s = SyntheticCriteo(
        cfg((100_000, 50.0)), 2000, SyntheticConfig(zipf_exponent=exponent, reuse_fraction=0.0)
    )
    ids = torch.cat([s.batch(i).sparse.values for i in range(5)])
    counts = torch.bincount(ids, minlength=100_000)
    assert fit_zipf_exponent(counts) == pytest.approx(exponent, rel=0.1)
    hot = torch.topk(counts, 10).indices
    assert int(hot.max()) >= 100  # hot ids are scattered, not rows 0..9


def test_reuse_copies_ids_of_the_previous_batch() -> None:
    c = cfg((10_000_000, 20.0), (10_000_000, 1.0))
    overlap = {}
    for r in (0.0, 0.5, 0.9):
        s = SyntheticCriteo(c, 500, SyntheticConfig(zipf_exponent=0.6, reuse_fraction=r))
        prev, cur = s.batch(6).sparse["t0"][0], s.batch(7).sparse["t0"][0]
        overlap[r] = float(torch.isin(cur, prev).double().mean())
    assert overlap[0.0] < 0.1
    assert overlap[0.5] >= 0.5 and overlap[0.9] >= 0.9  # every copied id is visible in batch i-1


def test_memory_does_not_grow() -> None:
    s = SyntheticCriteo(preset("tiny"), 32, SyntheticConfig(pooling="poisson"), num_batches=200)

    def snapshot() -> dict[str, object]:
        out = {}
        for k, v in vars(s).items():
            if isinstance(v, torch.Tensor):
                out[k] = (v.data_ptr(), v.numel())
            elif isinstance(v, (tuple, list, dict)):
                out[k] = len(v)
        return out

    before, keys = snapshot(), set(vars(s))
    assert sum(1 for _ in s) == 200
    assert set(vars(s)) == keys and snapshot() == before and s.position == 200


def test_teacher_paths_agree_and_are_learnable() -> None:
    s = SyntheticCriteo(preset("criteo_kaggle"), 4096, seed=5)
    b = s.batch(0)
    lengths = b.sparse.lengths.long()
    lay = s._layout(lengths, 4096)
    ids = b.sparse.values.view(lay.shape)
    fast = s._teacher.pieces(ids, lengths, 4096, b.dense, lay.per, 1)
    general = s._teacher.pieces(ids, lengths, 4096, b.dense, lay.per, None)
    assert torch.allclose(fast, general, atol=1e-4)
    logits = torch.cat([s.teacher_logits(s.batch(i)) for i in range(3)]).double()
    labels = torch.cat([s.batch(i).labels for i in range(3)]).double()
    assert auc(logits, labels) > 0.8
    w = torch.zeros(2, dtype=torch.float64)  # logistic regression on the true logit (Newton)
    x = torch.stack([logits, torch.ones_like(logits)], 1)
    for _ in range(25):
        p = torch.sigmoid(x @ w)
        w += torch.linalg.solve(x.T @ (x * (p * (1 - p)).unsqueeze(1)), x.T @ (labels - p))
    assert w[0] == pytest.approx(1.0, abs=0.15) and abs(float(w[1])) < 0.2  # labels ~ sigmoid(logit)


def test_dense_log_and_empty_bags() -> None:
    c = cfg((100, 0.0), (100, 2.0))
    raw = SyntheticCriteo(c, 64, SyntheticConfig(dense_log=False))
    logged = SyntheticCriteo(c, 64)
    br, bl = raw.batch(2), logged.batch(2)
    assert torch.allclose(torch.log1p(br.dense), bl.dense)
    assert torch.equal(br.dense, br.dense.floor())
    assert torch.allclose(raw.teacher_logits(br), logged.teacher_logits(bl))
    assert br.sparse["t0"][0].numel() == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"split": "test"}, "split"),
        ({"seed": -1}, "seed"),
        ({"start": -2}, "start"),
        ({"num_batches": -1}, "num_batches"),
        ({"data": SyntheticConfig(zipf_exponent=(1.0, 1.1))}, "zipf_exponent"),
    ],
)
def test_stream_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"config": SMALL, "batch_size": 8} | kwargs
    with pytest.raises(ValueError, match=match):
        SyntheticCriteo(**args)


@pytest.mark.parametrize("kwargs", [{"batch_size": 2.5}, {"batch_size": True}, {"seed": 1.0}, {"start": "0"}])
def test_stream_rejects_non_ints_with_type_error(kwargs: dict) -> None:
    with pytest.raises(TypeError, match=next(iter(kwargs))):
        SyntheticCriteo(**({"config": SMALL, "batch_size": 8} | kwargs))


def test_stream_rejects_bad_types_and_indices() -> None:
    with pytest.raises(TypeError, match="index_dtype"):
        SyntheticCriteo(SMALL, 8, index_dtype=torch.float32)
    with pytest.raises(TypeError, match="config"):
        SyntheticCriteo(bad("tiny"), 8)
    s = SyntheticCriteo(SMALL, 8)
    with pytest.raises(ValueError, match="i must be"):
        s.batch(-1)
    with pytest.raises(ValueError, match="position"):
        s.load_state_dict({"position": -3})
    with pytest.raises(ValueError, match="keys"):
        SyntheticCriteo(preset("tiny"), 8).teacher_logits(s.batch(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"zipf_exponent": -1.0}, "zipf_exponent"),
        ({"zipf_exponent": (1.0, 0.0)}, r"zipf_exponent\[1\]"),
        ({"zipf_exponent": ()}, "zipf_exponent"),
        ({"reuse_fraction": 1.0}, "reuse_fraction"),
        ({"pooling": "zipf"}, "pooling"),
        ({"positive_rate": 0.0}, "positive_rate"),
        ({"teacher_strength": -1.0}, "teacher_strength"),
        ({"label_noise": 0.3}, "label_noise"),
    ],
)
def test_synthetic_config_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SyntheticConfig(**kwargs)
    with pytest.raises(TypeError, match="dense_log"):
        SyntheticConfig(dense_log=bad(1))
