"""Prefetch: the next batches' rows come in beside the running step, exactly.

A background thread (PrefetchingIterator) prefetches while Trainer trains; losses and final
weights must equal an uncached run, prefetch must take misses off the critical path, and
checkpoints must resume at the batch the model stopped at (not where the thread got to).
"""

from __future__ import annotations

import pytest
import torch

from recnotebooks.cache.cached import CachedEmbeddingBagCollection
from recnotebooks.cache.config import CacheConfig
from recnotebooks.cache.prefetch import PrefetchingIterator
from recnotebooks.config import DLRMConfig, TableConfig
from recnotebooks.data.synthetic import SyntheticConfig, SyntheticCriteo
from recnotebooks.nn import DLRM, EmbeddingBagCollection, RowWiseAdagrad, SparseSGD
from recnotebooks.sparse import JaggedBatch
from recnotebooks.train import TrainConfig, Trainer


def model_config() -> DLRMConfig:
    tables = tuple(TableConfig(f"T{i}", n, 2.0) for i, n in enumerate((400, 600, 250)))
    return DLRMConfig(4, tables, 8, (16, 8), (16, 1), name="prefetch_test")


def trainer(cache: CacheConfig | None, depth: int = 0, steps: int = 16, seed: int = 7) -> Trainer:
    cfg = model_config()
    emb = None if cache is None else CachedEmbeddingBagCollection.for_model(cfg, cache, seed=seed)
    model = DLRM(cfg, seed=seed, embeddings=emb)
    data = SyntheticCriteo(cfg, 32, SyntheticConfig(zipf_exponent=1.1), seed=seed)
    train_data = data if emb is None or depth == 0 else PrefetchingIterator(data, emb, depth)
    tc = TrainConfig(
        steps=steps, warmup_steps=0, eval_batches=0, log_every=1, progress=False, time_phases=False
    )
    return Trainer(model, train_data, config=tc, device="cpu")


def tables_of(t: Trainer) -> torch.Tensor:
    e = t.model.embeddings
    return e.full_weight() if isinstance(e, CachedEmbeddingBagCollection) else e.weight.detach()


@pytest.mark.parametrize("cache, depth", [
    (CacheConfig("lru", capacity=0.6), 1),
    (CacheConfig("lfu", capacity=0.6), 2),
    (CacheConfig("setassoc", capacity=0.25, ways=8), 2),
    (CacheConfig("lru", shared_rows=700), 1),
])  # fmt: skip
def test_threaded_prefetch_training_is_exact(cache: CacheConfig, depth: int) -> None:
    plain, pre = trainer(None), trainer(cache, depth)
    plain.fit()
    pre.fit()
    assert [r["loss"] for r in pre.history] == pytest.approx([r["loss"] for r in plain.history], abs=1e-6)
    torch.testing.assert_close(tables_of(pre), tables_of(plain), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(pre.model.embeddings.full_row_state("momentum"), plain.sparse_opt.momentum)
    t = pre.model.embeddings.stats.total()
    assert t["prefetch_calls"] >= 15 and t["prefetched_misses"] > 0
    pre.train_data.close()


def test_prefetch_takes_misses_off_the_critical_path() -> None:
    """With prefetch, the forwards miss (far) less; the cache and the weights stay exact."""
    off, on = trainer(CacheConfig("lru", capacity=0.6)), trainer(CacheConfig("lru", capacity=0.6), 1)
    off.fit()
    on.fit()
    m_off, m_on = off.model.embeddings.stats.total(), on.model.embeddings.stats.total()
    assert m_on["misses"] < m_off["misses"] / 2  # forwards found most rows already resident
    assert m_on["misses"] + m_on["prefetched_misses"] >= m_off["misses"] * 0.8
    torch.testing.assert_close(tables_of(on), tables_of(off), atol=1e-6, rtol=1e-6)
    on.train_data.close()


def test_checkpoint_with_prefetch_resumes_at_the_model_position(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cache = CacheConfig("setassoc", capacity=0.25, ways=4)
    whole = trainer(cache, 2)
    whole.fit()
    first = trainer(cache, 2)
    first.fit(7, checkpoint=tmp_path / "p.pt")
    assert first.train_data.state_dict()["position"] == 7  # the thread drew ahead; the model did not
    resumed = trainer(cache, 2)
    resumed.load(tmp_path / "p.pt")
    resumed.fit()
    torch.testing.assert_close(tables_of(resumed), tables_of(whole), atol=1e-6, rtol=1e-6)
    for t in (whole, first, resumed):
        t.train_data.close()


def test_manual_prefetch_pipeline_equals_uncached() -> None:
    """prefetch(t+1) between backward(t) and step(t), by hand: outputs and weights exact."""
    tables = [TableConfig("a", 50), TableConfig("b", 80)]
    g = torch.Generator().manual_seed(0)

    def batch() -> JaggedBatch:
        lens = torch.randint(0, 4, (16,), generator=g)
        na = int(lens[:8].sum())
        vals = torch.cat(
            [
                torch.randint(0, 50, (na,), generator=g),
                torch.randint(0, 80, (int(lens.sum()) - na,), generator=g),
            ]
        )
        return JaggedBatch(("a", "b"), vals, lens, 8)

    batches = [batch() for _ in range(25)]
    ref = EmbeddingBagCollection(tables, 4, seed=2)
    c = CachedEmbeddingBagCollection(tables, 4, CacheConfig("lfu_cached", capacity=30), seed=2)
    o1, o2 = SparseSGD(ref, 0.5), SparseSGD(c, 0.5)
    c.prefetch(batches[0])
    for i, b in enumerate(batches[:-1]):
        y1, y2 = ref(b), c(b)
        torch.testing.assert_close(y2, y1, atol=1e-6, rtol=1e-6)
        y1.square().sum().backward()
        y2.square().sum().backward()
        c.prefetch(batches[i + 1])
        o1.step()
        o2.step()
    torch.testing.assert_close(c.full_weight(), ref.weight.detach(), atol=1e-6, rtol=1e-6)
    assert c.stats.total()["prefetch_calls"] == 25


def test_checkpoint_snapshot_holds_prefetch_until_the_next_forward() -> None:
    """Trainer.save takes the model's snapshot, then the optimizer's momentum (a view over the
    slots), serialized later: a prefetch in between (the thread running on) must not change
    the slots, or the checkpoint pairs one row's momentum with another row's slot."""
    tables = [TableConfig("a", 60), TableConfig("b", 40)]
    g = torch.Generator().manual_seed(3)
    batches = [
        JaggedBatch(("a", "b"), torch.cat([torch.randint(0, 60, (6,), generator=g),
                    torch.randint(0, 40, (6,), generator=g)]), torch.full((12,), 1), 6)
        for _ in range(10)
    ]  # fmt: skip

    def make() -> tuple[CachedEmbeddingBagCollection, RowWiseAdagrad]:
        c = CachedEmbeddingBagCollection(tables, 3, CacheConfig("lru", capacity=14), seed=0)
        return c, RowWiseAdagrad(c, 0.2)

    def train(c: CachedEmbeddingBagCollection, o: RowWiseAdagrad, bs: list[JaggedBatch]) -> None:
        for b in bs:
            c(b).square().sum().backward()
            o.step()

    a, oa = make()
    train(a, oa, batches[:5])
    sd = a.state_dict()
    assert a.prefetch(batches[5]) == 0  # held: the snapshot's slots stay as saved
    osd = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in oa.state_dict().items()}
    r, o_r = make()
    r.load_state_dict(sd)
    o_r.load_state_dict(osd)
    train(a, oa, batches[5:7])
    assert a.prefetch(batches[7]) > 0  # a forward ended the hold
    train(a, oa, batches[7:])
    train(r, o_r, batches[5:])
    torch.testing.assert_close(r.full_weight(), a.full_weight(), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(r.full_row_state("momentum"), a.full_row_state("momentum"))


def test_prefetch_depth_zero_passes_batches_through() -> None:
    cfg = model_config()
    emb = CachedEmbeddingBagCollection.for_model(cfg, CacheConfig("lru", capacity=0.6))
    data = SyntheticCriteo(cfg, 8, seed=1, num_batches=3)
    it = PrefetchingIterator(data, emb, depth=0)
    assert len(list(it)) == 3 and emb.stats.total()["prefetch_calls"] == 0
    assert emb.prefetching(data).depth == 0  # CacheConfig.prefetch_depth defaults to 0


def test_errors_in_the_thread_reach_the_consumer() -> None:
    emb = CachedEmbeddingBagCollection([TableConfig("a", 10)], 2, CacheConfig("lru", capacity=4))
    bad = [JaggedBatch.from_lists({"a": [[1]]}), JaggedBatch.from_lists({"a": [[12]]})]
    it = iter(PrefetchingIterator(bad, emb, depth=1))
    next(it)
    with pytest.raises(ValueError, match="out of range for table 'a'"):
        next(it)


def test_bad_prefetch_input() -> None:
    emb = CachedEmbeddingBagCollection([TableConfig("a", 10)], 2, CacheConfig("lru", capacity=4))
    with pytest.raises(TypeError, match="cached embedding collection"):
        PrefetchingIterator([], EmbeddingBagCollection([TableConfig("a", 10)], 2), 1)
    with pytest.raises(ValueError, match="depth"):
        PrefetchingIterator([], emb, -1)
    with pytest.raises(TypeError, match="iterable"):
        PrefetchingIterator(3, emb, 1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_side_stream_prefetch_is_exact() -> None:
    cfg = model_config()
    plain = DLRM(cfg, seed=7, device="cuda")
    emb = CachedEmbeddingBagCollection.for_model(cfg, CacheConfig("lru", capacity=0.6), device="cuda", seed=7)
    cached = DLRM(cfg, seed=7, device="cuda", embeddings=emb)
    tc = TrainConfig(steps=12, warmup_steps=0, eval_batches=0, log_every=1, progress=False, time_phases=False)
    data = SyntheticCriteo(cfg, 32, seed=7)
    a = Trainer(plain, data, config=tc, device="cuda")
    b = Trainer(
        cached, PrefetchingIterator(SyntheticCriteo(cfg, 32, seed=7), emb, 2), config=tc, device="cuda"
    )
    a.fit()
    b.fit()
    assert [r["loss"] for r in b.history] == pytest.approx([r["loss"] for r in a.history], abs=1e-5)
    torch.testing.assert_close(
        emb.full_weight().cuda(), plain.embeddings.weight.detach(), atol=1e-5, rtol=1e-5
    )
    assert emb.stats.total()["prefetched_misses"] > 0
    b.train_data.close()
