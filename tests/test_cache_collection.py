"""CachedEmbeddingBagCollection: training with the cache equals training without it.

Property tests drive a cached and an uncached collection (same seed, same init) through
the same batch streams, which force many evictions, and compare every forward's output and,
after flush(), every weight and optimizer state. A reference dirty-row model checks that no
row is written back twice without an update in between, and that every updated row is
written back (nothing lost).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from _values import bad
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recnotebooks.kernels.fused as fused
from recnotebooks.cache.cached import CachedEmbeddingBagCollection
from recnotebooks.cache.config import CacheConfig
from recnotebooks.cache.policies import POLICIES
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.nn import DLRM, EmbeddingBagCollection, ExactAdagrad, RowWiseAdagrad, SparseSGD
from recnotebooks.sparse import JaggedBatch
from recnotebooks.train import TrainConfig, Trainer

MAX_BAG = 3


def make_batches(
    rows: list[int], batch_size: int, steps: int, seed: int, weighted: bool
) -> list[JaggedBatch]:
    """Random jagged batches over tables of ``rows`` rows (bags of 0..MAX_BAG ids)."""
    g = torch.Generator().manual_seed(seed)
    keys = tuple(f"t{i}" for i in range(len(rows)))
    out = []
    for _ in range(steps):
        lens = torch.randint(0, MAX_BAG + 1, (len(rows) * batch_size,), generator=g)
        per_key = lens.view(len(rows), batch_size).sum(1)
        vals = torch.cat(
            [torch.randint(0, r, (int(n),), generator=g) for r, n in zip(rows, per_key, strict=True)]
        )
        w = torch.rand(vals.numel(), generator=g) + 0.5 if weighted else None
        out.append(JaggedBatch(keys, vals, lens, batch_size, w))
    return out


class WritebackAudit:
    """Reference dirty model: a row may be written back only after a gradient lookup since
    its last write-back; after the final flush every such row has been written back."""

    def __init__(self, coll: CachedEmbeddingBagCollection) -> None:
        self.dirty: set[int] = set()
        self.writes = 0
        inner = coll.store._to_host

        def to_host(slots: np.ndarray, rows: np.ndarray) -> None:
            for r in rows.tolist():
                assert r in self.dirty, f"row {r} written back without an update since its last write-back"
                self.dirty.discard(r)
            self.writes += len(rows)
            inner(slots, rows)

        coll.store._to_host = to_host  # type: ignore[method-assign]
        self.coll = coll

    def looked_up(self, batch: JaggedBatch) -> None:
        self.dirty.update(int(r) for r in self.coll.global_ids(batch).unique())


def _config(
    draw: st.DrawFn, rows: list[int], batch_size: int, accumulate: bool, prefetch: bool
) -> CacheConfig:
    policy = draw(st.sampled_from(POLICIES))
    need = batch_size * MAX_BAG * (2 if accumulate else 1)  # distinct rows a step may pin per table
    shared = draw(st.booleans())
    if policy == "setassoc":
        ways = draw(st.sampled_from([w for w in (1, 2, 4) if w <= min(rows)]))  # a set fits every table
        if shared:
            return CacheConfig(policy, shared_rows=ways * draw(st.integers(1, sum(rows) // ways)), ways=ways)
        return CacheConfig(policy, capacity=ways * draw(st.integers(1, min(rows) // ways)), ways=ways)
    if policy in ("lru", "lfu", "lfu_cached"):
        lo = need * (len(rows) if shared else 1)
        if shared:
            return CacheConfig(policy, shared_rows=draw(st.integers(lo, max(lo, sum(rows) // 2))))
        return CacheConfig(policy, capacity=draw(st.integers(min(lo, min(rows)), min(rows))))
    if shared:
        return CacheConfig(policy, shared_rows=draw(st.integers(1, sum(rows))))
    return CacheConfig(policy, capacity=draw(st.integers(1, min(rows))))


#: Each sparse optimizer by its name (``config.SPARSE_OPTIMIZERS``).
OPTIMIZERS = {"sgd": SparseSGD, "rowwise_adagrad": RowWiseAdagrad, "adagrad": ExactAdagrad}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    ntab = draw(st.integers(1, 3))
    batch_size = draw(st.integers(1, 4))
    accumulate = draw(st.booleans())
    prefetch = draw(st.booleans())
    need = batch_size * MAX_BAG * (2 if accumulate else 1)
    rows = [draw(st.integers(need, 8 * need)) for _ in range(ntab)]
    cfg = _config(draw, rows, batch_size, accumulate, prefetch)
    return {
        "rows": rows,
        "batch_size": batch_size,
        "cache": cfg,
        "pooling": draw(st.sampled_from(["sum", "mean"])),
        "weighted": draw(st.booleans()),
        "optimizer": draw(st.sampled_from(list(OPTIMIZERS))),
        "fused": draw(st.booleans()),
        "prefetch": prefetch,
        "accumulate": accumulate,
        "seed": draw(st.integers(0, 10_000)),
    }


def run_pair(
    s: dict, steps: int = 14
) -> tuple[EmbeddingBagCollection, CachedEmbeddingBagCollection, object, object]:
    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(s["rows"])]
    batches = make_batches(s["rows"], s["batch_size"], steps + 1, s["seed"], s["weighted"])
    kw = {"profile": batches[:2]} if s["cache"].policy == "static" else {}
    ref = EmbeddingBagCollection(tables, 3, s["pooling"], seed=s["seed"])
    cached = CachedEmbeddingBagCollection(tables, 3, s["cache"], s["pooling"], seed=s["seed"], **kw)
    opt_cls = OPTIMIZERS[s["optimizer"]]
    o_ref, o_c = opt_cls(ref, 0.3), opt_cls(cached, 0.3)
    audit = WritebackAudit(cached)
    g = torch.Generator().manual_seed(s["seed"] + 1)
    per_step = 2 if s["accumulate"] else 1
    for step in range(0, steps, per_step):
        for b in batches[step : step + per_step]:
            y_ref, y_c = ref(b), cached(b)
            torch.testing.assert_close(y_c, y_ref, atol=1e-6, rtol=1e-6)
            audit.looked_up(b)
            target = torch.randn(y_ref.shape, generator=g)
            (y_ref * target).sum().backward()
            (y_c * target).sum().backward()
        if s["prefetch"]:  # the next batch's rows come in while this step's rows are still in use
            cached.prefetch(batches[step + per_step])
        o_ref.step()
        o_c.step()
    return ref, cached, (o_ref, o_c), audit


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
def test_cached_training_equals_uncached(s: dict) -> None:
    old, fused.ENABLED = fused.ENABLED, s["fused"]  # fused kernel on and off
    try:
        ref, cached, (o_ref, o_c), audit = run_pair(s)
    finally:
        fused.ENABLED = old
    torch.testing.assert_close(cached.full_weight(), ref.weight.detach(), atol=1e-6, rtol=1e-6)
    if s["optimizer"] != "sgd":  # the accumulators (exact Adagrad's: a row of them) travel with their rows
        torch.testing.assert_close(cached.full_row_state("momentum"), o_ref.momentum, atol=1e-6, rtol=1e-6)
    assert not audit.dirty, f"rows updated but never written back: {sorted(audit.dirty)[:5]}"
    assert cached.stats.total()["writebacks"] == audit.writes
    t = cached.stats.total()
    assert t["hits"] + t["misses"] == t["unique"] and t["calls"] > 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=scenarios())
def test_state_dict_roundtrip_resumes_exactly(s: dict) -> None:
    """Save mid-run, load into a fresh collection, continue: the same as never stopping (with
    row-wise Adagrad's accumulator, or exact Adagrad's row of them, registered by the load)."""
    s = {**s, "prefetch": False, "accumulate": False}
    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(s["rows"])]
    batches = make_batches(s["rows"], s["batch_size"], 12, s["seed"], s["weighted"])
    kw = {"profile": batches[:2]} if s["cache"].policy == "static" else {}

    adagrad = ExactAdagrad if s["optimizer"] == "adagrad" else RowWiseAdagrad

    def make() -> tuple[CachedEmbeddingBagCollection, RowWiseAdagrad | ExactAdagrad]:
        c = CachedEmbeddingBagCollection(tables, 3, s["cache"], s["pooling"], seed=s["seed"], **kw)
        return c, adagrad(c, 0.2)

    def train(
        c: CachedEmbeddingBagCollection, opt: RowWiseAdagrad | ExactAdagrad, bs: list[JaggedBatch]
    ) -> None:
        for b in bs:
            c(b).square().sum().backward()
            opt.step()

    a, oa = make()
    train(a, oa, batches)
    b, ob = make()
    train(b, ob, batches[:6])
    sd, osd = b.state_dict(), ob.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in sd.values())
    c, oc = make()
    c.load_state_dict(sd)
    oc.load_state_dict(osd)
    train(c, oc, batches[6:])
    torch.testing.assert_close(c.full_weight(), a.full_weight(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(
        c.full_row_state("momentum"), a.full_row_state("momentum"), atol=1e-6, rtol=1e-6
    )


# ----- DLRM + Trainer ---------------------------------------------------------------------------
def small_model() -> DLRMConfig:
    tables = tuple(TableConfig(f"T{i}", n, 2.0) for i, n in enumerate((300, 500, 200)))
    return DLRMConfig(4, tables, 8, (16, 8), (16, 1), name="cache_test")


def make_trainer(cache: CacheConfig | None, steps: int = 12) -> Trainer:
    cfg = small_model()
    emb = None if cache is None else CachedEmbeddingBagCollection.for_model(cfg, cache, seed=3)
    model = DLRM(cfg, seed=3, embeddings=emb)
    data = SyntheticCriteo(cfg, 32, SyntheticConfig(zipf_exponent=1.1), seed=5)
    tc = TrainConfig(
        steps=steps, warmup_steps=0, eval_batches=0, log_every=1, progress=False, time_phases=False
    )
    return Trainer(model, data, config=tc, device="cpu")


def final_tables(t: Trainer) -> torch.Tensor:
    emb = t.model.embeddings
    return emb.full_weight() if isinstance(emb, CachedEmbeddingBagCollection) else emb.weight.detach()


@pytest.mark.parametrize("cache", [
    CacheConfig("lru", capacity=0.5), CacheConfig("setassoc", capacity=0.3, ways=8),
    CacheConfig("lfu", shared_rows=400),
])  # fmt: skip
def test_trainer_with_cache_equals_without(cache: CacheConfig) -> None:
    plain, cached = make_trainer(None), make_trainer(cache)
    plain.fit()
    cached.fit()
    assert [r["loss"] for r in cached.history] == pytest.approx([r["loss"] for r in plain.history], abs=1e-6)
    torch.testing.assert_close(final_tables(cached), final_tables(plain), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(cached.model.embeddings.full_row_state("momentum"), plain.sparse_opt.momentum)
    assert cached.model.embeddings.stats.total()["evictions"] > 0


def test_trainer_checkpoint_resume_with_cache(tmp_path: Path) -> None:
    cache = CacheConfig("setassoc", capacity=0.25, ways=4)
    whole = make_trainer(cache)
    whole.fit()
    first = make_trainer(cache)
    first.fit(6, checkpoint=tmp_path / "run.pt")
    resumed = make_trainer(cache)
    resumed.load(tmp_path / "run.pt")
    resumed.fit()
    torch.testing.assert_close(final_tables(resumed), final_tables(whole), atol=1e-6, rtol=1e-6)
    assert [r["loss"] for r in resumed.history] == pytest.approx([r["loss"] for r in whole.history], abs=1e-6)


# ----- statistics -------------------------------------------------------------------------------
def test_stats_rows_and_fae_fraction() -> None:
    tables = [TableConfig("a", 20), TableConfig("b", 20)]
    c = CachedEmbeddingBagCollection(
        tables, 2, CacheConfig("static", capacity=2), hot_rows={"a": [0, 1], "b": [0]}
    )
    b = JaggedBatch.from_lists({"a": [[0, 1], [0, 5]], "b": [[0], [0]]})
    with torch.no_grad():
        c(b)
    t = c.stats.total()
    assert (t["unique"], t["hits"], t["misses"], t["bypass"], t["requested"]) == (4, 3, 1, 1, 6)
    assert c.stats.lookup_hit_rate == pytest.approx(5 / 6)
    assert c.stats.all_hit_sample_fraction == pytest.approx(0.5)  # sample 1 looked up cold row 5
    rows = c.stats.rows()
    assert [r["table"] for r in rows] == ["a", "b", "total"] and all(r["source"] == "measured" for r in rows)
    assert (
        t["bytes_h2d"] == 1 * 2 * 4
    )  # the staged cold row (the hot set loaded at construction is not traffic)
    assert t["conflict_misses"] == 0


# ----- bad input --------------------------------------------------------------------------------
TABLES = [TableConfig("a", 40), TableConfig("b", 64)]


@pytest.mark.parametrize("kwargs, err, match", [
    ({"capacity": 0}, ValueError, "capacity"),
    ({"capacity": 1.5}, ValueError, "capacity"),
    ({"capacity": True}, TypeError, "capacity"),
    ({"policy": "fifo"}, ValueError, "policy"),
    ({"policy": "setassoc", "capacity": 30, "ways": 8}, ValueError, "ways must divide"),
    ({"capacity": 10, "shared_rows": 10}, ValueError, "not both"),
    ({"prefetch_depth": -1}, ValueError, "prefetch_depth"),
])  # fmt: skip
def test_bad_config(kwargs: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        CacheConfig(**kwargs)


def test_bad_collection_input() -> None:
    with pytest.raises(ValueError, match="capacity must be at most the rows"):
        CachedEmbeddingBagCollection(TABLES, 2, CacheConfig(capacity=50))
    with pytest.raises(ValueError, match="shared_rows must be at most"):
        CachedEmbeddingBagCollection(TABLES, 2, CacheConfig(shared_rows=105))
    with pytest.raises(ValueError, match="hot set"):
        CachedEmbeddingBagCollection(TABLES, 2, CacheConfig("static", capacity=4))
    with pytest.raises(ValueError, match="only used by policy 'static'"):
        CachedEmbeddingBagCollection(TABLES, 2, CacheConfig("lru", capacity=4), hot_rows={"a": [1]})
    with pytest.raises(TypeError, match="cache"):
        CachedEmbeddingBagCollection(TABLES, 2, bad("lru"))
    c = CachedEmbeddingBagCollection(TABLES, 2, CacheConfig("lru", capacity=3))
    too_many = JaggedBatch.from_lists({"a": [[0, 1, 2, 3]], "b": [[0]]})
    with pytest.raises(ValueError, match=r"capacity >= 4"):
        c(too_many)
    with pytest.raises(ValueError, match="out of range for table 'b'"):
        c(JaggedBatch.from_lists({"a": [[0]], "b": [[64]]}))
    ok = JaggedBatch.from_lists({"a": [[0, 1]], "b": [[5]]})  # still usable after the errors
    ref = EmbeddingBagCollection(TABLES, 2)
    torch.testing.assert_close(c(ok), ref(ok))


def test_dlrm_rejects_mismatched_embeddings() -> None:
    cfg = small_model()
    other = CachedEmbeddingBagCollection(TABLES, 8, CacheConfig(capacity=4))
    with pytest.raises(ValueError, match="embeddings must have the config's tables"):
        DLRM(cfg, embeddings=other)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("adagrad", [RowWiseAdagrad, ExactAdagrad])
def test_cuda_cached_equals_uncached(adagrad: type) -> None:
    s = {"rows": [200, 90], "batch_size": 8, "cache": CacheConfig("setassoc", capacity=32, ways=8),
         "pooling": "sum", "weighted": True, "seed": 1}  # fmt: skip
    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(s["rows"])]
    batches = make_batches(s["rows"], 8, 20, 1, True)
    ref = EmbeddingBagCollection(tables, 4, seed=1, device="cuda")
    c = CachedEmbeddingBagCollection(tables, 4, s["cache"], seed=1, device="cuda")
    assert c.store._host.is_pinned() and c.weight.device.type == "cuda"
    o1, o2 = adagrad(ref, 0.2), adagrad(c, 0.2)
    for i, b in enumerate(batches[:-1]):
        b = b.to("cuda")
        y1, y2 = ref(b), c(b)
        torch.testing.assert_close(y2, y1, atol=1e-6, rtol=1e-6)
        y1.square().sum().backward()
        y2.square().sum().backward()
        c.prefetch(batches[i + 1].to("cuda"))
        o1.step()
        o2.step()
    torch.testing.assert_close(c.full_weight().cuda(), ref.weight.detach(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(c.full_row_state("momentum").cuda(), o1.momentum, atol=1e-6, rtol=1e-6)


def test_min_rows_gives_small_tables_room_for_a_batch() -> None:
    """A fractional capacity with ``min_rows``: small tables get min(rows, min_rows) slots, large
    ones their fraction; a batch that 5% of a 100-row table could not hold then trains."""
    from recnotebooks.cache import CacheConfig
    from recnotebooks.config import TableConfig

    tables = (TableConfig("small", 100, 1.0), TableConfig("big", 100_000, 1.0))
    assert CacheConfig(capacity=0.05).capacities(tables) == (5, 5_000)
    assert CacheConfig(capacity=0.05, min_rows=1024).capacities(tables) == (100, 5_000)
    assert CacheConfig(capacity=0.05, min_rows=10_000).capacities(tables) == (100, 10_000)
    with pytest.raises(ValueError, match="min_rows applies to a fractional capacity"):
        CacheConfig(capacity=64, min_rows=10)
    with pytest.raises(TypeError, match="min_rows"):
        CacheConfig(capacity=0.1, min_rows=1.5)


def test_exact_adagrad_state_moves_with_its_rows_and_is_counted_in_the_bytes() -> None:
    """Exact Adagrad's accumulators (a row of ``dim`` per table row) live in the slots beside
    their rows: a miss copies row and state in, and the statistics count ``dim`` floats of state
    per row moved (row-wise Adagrad's one float, SGD's none)."""
    tables = [TableConfig("a", 20), TableConfig("b", 20)]
    batch = JaggedBatch.from_lists({"a": [[0, 1], [0, 5]], "b": [[0], [7]]})
    moved = {}
    for name, opt_cls in OPTIMIZERS.items():
        c = CachedEmbeddingBagCollection(tables, 3, CacheConfig("lru", capacity=8))
        opt = opt_cls(c, 0.1)
        c(batch).sum().backward()
        opt.step()
        t = c.stats.total()
        moved[name] = t["bytes_h2d"] / t["misses"]
        if name == "adagrad":
            assert opt.momentum.shape == (c.capacity, 3)
            assert c.full_row_state("momentum").shape == (40, 3)
    assert moved == {"sgd": 3 * 4, "rowwise_adagrad": 3 * 4 + 4, "adagrad": 3 * 4 + 3 * 4}
