"""The fused EmbeddingBagCollection against per-table torch.nn.EmbeddingBag references."""

from __future__ import annotations

import contextlib
import itertools
from unittest import mock

import pytest
import torch
from _values import bad
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from recnotebooks.config import TableConfig
from recnotebooks.nn import EmbeddingBagCollection, ExactAdagrad, RowWiseAdagrad, SparseSGD
from recnotebooks.nn import embedding as embedding_module
from recnotebooks.sparse import JaggedBatch


def random_batch(rows: list[int], batch_size: int, max_len: int, gen: torch.Generator, weighted: bool):
    keys = tuple(f"t{i}" for i in range(len(rows)))
    lengths = torch.randint(0, max_len + 1, (len(rows) * batch_size,), generator=gen)
    per_key = lengths.view(len(rows), batch_size).sum(1)
    vals = torch.cat(
        [torch.randint(0, r, (int(n),), generator=gen) for r, n in zip(rows, per_key, strict=True)]
    )
    w = torch.rand(vals.numel(), generator=gen) if weighted else None
    return JaggedBatch(keys, vals, lengths, batch_size, w)


def reference_bags(ebc: EmbeddingBagCollection, mode: str) -> nn.ModuleList:
    bags = nn.ModuleList()
    for key in ebc.keys:
        w = ebc.table_weight(key).clone()
        bags.append(nn.EmbeddingBag.from_pretrained(w, freeze=False, mode=mode, sparse=False))
    return bags


def reference_forward(bags: nn.ModuleList, batch: JaggedBatch) -> torch.Tensor:
    outs = []
    for i, key in enumerate(batch.keys):
        vals, lens = batch[key]
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)[:-1]])
        w = None
        if batch.weights is not None:
            lo = int(batch.offsets()[i * batch.batch_size])
            w = batch.weights[lo : lo + vals.numel()]
        if w is not None and bags[i].mode == "mean":
            # torch's EmbeddingBag has no weighted mean: weighted sum / bag size
            s = nn.functional.embedding_bag(vals, bags[i].weight, offsets, mode="sum", per_sample_weights=w)
            outs.append(s / lens.clamp(min=1).unsqueeze(1))
        else:
            outs.append(bags[i](vals, offsets, per_sample_weights=w))
    return torch.stack(outs, dim=1)


settings_cases = given(
    rows=st.lists(st.integers(1, 50), min_size=1, max_size=5),
    batch_size=st.integers(1, 6),
    max_len=st.integers(0, 5),
    mode=st.sampled_from(["sum", "mean"]),
    weighted=st.booleans(),
    seed=st.integers(0, 10_000),
)


@settings_cases
def test_forward_and_gradients_match_per_table_reference(rows, batch_size, max_len, mode, weighted, seed):
    gen = torch.Generator().manual_seed(seed)
    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(rows)]
    ebc = EmbeddingBagCollection(tables, 4, pooling=mode, seed=seed)
    ref = reference_bags(ebc, mode)
    batch = random_batch(rows, batch_size, max_len, gen, weighted)

    out = ebc(batch)
    expected = reference_forward(ref, batch)
    torch.testing.assert_close(out, expected)

    upstream = torch.randn(out.shape, generator=gen)
    (out * upstream).sum().backward()
    (expected * upstream).sum().backward()
    got = ebc.dense_weight_gradient()
    for i in range(len(ebc.keys)):
        lo, hi = int(ebc.row_offsets[i]), int(ebc.row_offsets[i + 1])
        torch.testing.assert_close(got[lo:hi], ref[i].weight.grad)
    rg = ebc.row_gradients()
    assert torch.equal(rg.rows, torch.unique(ebc.global_ids(batch).long()))


#: Each sparse optimizer by its name (the names of ``config.SPARSE_OPTIMIZERS``).
OPTIMIZERS = {"sgd": SparseSGD, "rowwise_adagrad": RowWiseAdagrad, "adagrad": ExactAdagrad}


@pytest.fixture(params=["fused", "unfused"])
def kernel_path(request, monkeypatch):
    """Run a test through the fused Numba kernel and through the plain torch path."""
    import recnotebooks.kernels.fused as fused

    monkeypatch.setattr(fused, "ENABLED", request.param == "fused")
    return request.param


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_weights_after_optimizer_steps_match_reference(opt_name, mode, kernel_path):
    gen = torch.Generator().manual_seed(3)
    rows = [30, 7, 100]
    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(rows)]
    ebc = EmbeddingBagCollection(tables, 8, pooling=mode, seed=1)
    ref = reference_bags(ebc, mode)
    lr = 0.1
    opt = OPTIMIZERS[opt_name](ebc, lr)
    state = [torch.zeros(r) if opt_name == "rowwise_adagrad" else torch.zeros(r, 8) for r in rows]
    for _ in range(4):
        batch = random_batch(rows, 5, 4, gen, weighted=False)
        up = torch.randn(5, len(rows), 8, generator=gen)
        (ebc(batch) * up).sum().backward()
        opt.step()
        (reference_forward(ref, batch) * up).sum().backward()
        with torch.no_grad():
            for i, bag in enumerate(ref):
                g = bag.weight.grad
                touched = g.abs().sum(1) > 0  # the rows the batch looked up
                if opt_name == "sgd":
                    bag.weight -= lr * g
                elif opt_name == "rowwise_adagrad":  # on the touched rows only
                    state[i][touched] += g[touched].square().mean(1)
                    upd = g / (state[i].sqrt() + 1e-8).unsqueeze(1)
                    bag.weight[touched] -= lr * upd[touched]
                else:  # exact Adagrad: element by element, touched rows only
                    state[i][touched] += g[touched].square()
                    bag.weight[touched] -= lr * g[touched] / (state[i][touched].sqrt() + 1e-8)
                bag.weight.grad = None
    for i, key in enumerate(ebc.keys):
        torch.testing.assert_close(ebc.table_weight(key), ref[i].weight.detach(), rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.lists(st.integers(1, 12), min_size=1, max_size=3),
    batch_size=st.integers(1, 6),
    max_len=st.integers(1, 6),
    mode=st.sampled_from(["sum", "mean"]),
    weighted=st.booleans(),
    steps=st.integers(1, 3),
    lr=st.sampled_from([0.01, 0.1, 0.5]),
    eps=st.sampled_from([1e-8, 1e-3]),
    init=st.sampled_from([0.0, 0.1]),
    seed=st.integers(0, 10_000),
)
def test_exact_adagrad_is_torch_adagrad_on_dense_rows(
    rows, batch_size, max_len, mode, weighted, steps, lr, eps, init, seed
):
    """Exact Adagrad, fused and unfused, against ``torch.optim.Adagrad`` over the same tables held
    as dense parameters (``nn.EmbeddingBag``, dense gradients): tables of at most 12 rows, so ids
    repeat within bags and across them (each row's gradient summed first). Touched rows and
    their accumulators match; untouched rows keep their weights and state exactly (torch's
    zero gradient adds 0 to the state and moves the weight by ``0 / (sqrt(s) + eps) = 0``)."""
    import recnotebooks.kernels.fused as fused

    tables = [TableConfig(f"t{i}", r) for i, r in enumerate(rows)]
    for enabled in (True, False):
        gen = torch.Generator().manual_seed(seed)
        ebc = EmbeddingBagCollection(tables, 5, pooling=mode, seed=seed)
        ref = reference_bags(ebc, mode)
        opt = ExactAdagrad(ebc, lr, eps=eps, initial_accumulator_value=init)
        torch_opt = torch.optim.Adagrad(ref.parameters(), lr=lr, eps=eps, initial_accumulator_value=init)
        touched = [torch.zeros(r, dtype=torch.bool) for r in rows]
        with mock.patch.object(fused, "ENABLED", enabled):
            for _ in range(steps):
                batch = random_batch(rows, batch_size, max_len, gen, weighted)
                up = torch.randn(batch_size, len(rows), 5, generator=gen)
                (ebc(batch) * up).sum().backward()
                opt.step()
                (reference_forward(ref, batch) * up).sum().backward()
                torch_opt.step()
                torch_opt.zero_grad()
                for i, key in enumerate(batch.keys):
                    touched[i][batch[key][0]] = True
        for i, key in enumerate(ebc.keys):
            lo, hi = int(ebc.row_offsets[i]), int(ebc.row_offsets[i + 1])
            w, want = ebc.table_weight(key), ref[i].weight.detach()
            s, want_s = opt.momentum[lo:hi], torch_opt.state[ref[i].weight]["sum"]
            t = touched[i]
            torch.testing.assert_close(w[t], want[t], rtol=0, atol=1e-6)
            torch.testing.assert_close(s[t], want_s[t], rtol=1e-5, atol=1e-6)
            assert torch.equal(w[~t], want[~t]) and torch.equal(s[~t], want_s[~t])
            assert bool((s[~t] == init).all())  # never written


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_fused_and_unfused_paths_agree_with_weights_and_accumulation(opt_name, monkeypatch):
    import recnotebooks.kernels.fused as fused

    results = []
    for enabled in (True, False):
        monkeypatch.setattr(fused, "ENABLED", enabled)
        gen = torch.Generator().manual_seed(7)
        rows = [40, 9, 300]
        ebc = EmbeddingBagCollection([TableConfig(f"t{i}", r) for i, r in enumerate(rows)], 16, seed=2)
        opt = OPTIMIZERS[opt_name](ebc, 0.3)
        for _ in range(3):
            b1 = random_batch(rows, 7, 5, gen, weighted=True)
            b2 = random_batch(rows, 3, 5, gen, weighted=False)
            (ebc(b1).square().sum() + ebc(b2).sum()).backward()  # two forwards, one step
            assert opt.step() > 0
        results.append((ebc.weight.detach().clone(), getattr(opt, "momentum", torch.zeros(1)).clone()))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)


def test_optimizer_touches_only_looked_up_rows(kernel_path):
    ebc = EmbeddingBagCollection([TableConfig("a", 1000), TableConfig("b", 10)], 4)
    before = ebc.weight.detach().clone()
    batch = JaggedBatch.from_lists({"a": [[1, 5], [5]], "b": [[9], []]})
    ebc(batch).sum().backward()
    SparseSGD(ebc, 0.5).step()
    changed = (ebc.weight.detach() != before).any(1).nonzero().flatten().tolist()
    assert changed == [1, 5, 1000 + 9]


def test_gradient_accumulation_over_two_forwards():
    ebc = EmbeddingBagCollection([TableConfig("a", 20)], 3)
    b1 = JaggedBatch.from_lists({"a": [[1, 2], [2]]})
    b2 = JaggedBatch.from_lists({"a": [[2, 3]]})
    (ebc(b1).sum() + 2 * ebc(b2).sum()).backward()
    g = ebc.dense_weight_gradient()
    expected = torch.zeros(20, 3)
    expected[1] = 1
    expected[2] = 2 + 2
    expected[3] = 2
    torch.testing.assert_close(g, expected)


def test_out_of_range_id_names_table_and_id():
    ebc = EmbeddingBagCollection([TableConfig("users", 10), TableConfig("items", 5)], 4)
    batch = JaggedBatch.from_lists({"users": [[1], [9]], "items": [[4], [5]]})
    with pytest.raises(ValueError, match=r"id 5 .*'items'.*num_rows=5"):
        ebc(batch)
    neg = JaggedBatch.from_lists({"users": [[-1], [0]], "items": [[0], [0]]})
    with pytest.raises(ValueError, match=r"id -1 .*'users'"):
        ebc(neg)


def test_wrong_keys_rejected():
    ebc = EmbeddingBagCollection([TableConfig("a", 10)], 4)
    with pytest.raises(ValueError, match="batch.keys"):
        ebc(JaggedBatch.from_lists({"b": [[1]]}))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"embedding_dim": 0}, "embedding_dim"),
        ({"pooling": "max"}, "pooling"),
        ({"dtype": torch.int64}, "dtype"),
    ],
)
def test_constructor_validation(kwargs, match):
    args = {"tables": [TableConfig("a", 10)], "embedding_dim": 4} | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        EmbeddingBagCollection(**args)


def test_no_grad_forward_records_nothing():
    ebc = EmbeddingBagCollection([TableConfig("a", 10)], 4)
    with torch.no_grad():
        ebc(JaggedBatch.from_lists({"a": [[1, 2]]}))
    assert not ebc._pending


@pytest.mark.gpu
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_cuda_matches_cpu(opt_name):
    tables = [TableConfig("a", 100), TableConfig("b", 50)]
    cpu = EmbeddingBagCollection(tables, 8, seed=0)
    gpu = EmbeddingBagCollection(tables, 8, seed=0, device="cuda")
    opt_c, opt_g = OPTIMIZERS[opt_name](cpu, 0.1), OPTIMIZERS[opt_name](gpu, 0.1)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        batch = random_batch([100, 50], 16, 4, gen, weighted=True)
        out_c, out_g = cpu(batch), gpu(batch.to("cuda"))
        torch.testing.assert_close(out_g.cpu(), out_c)
        out_c.square().sum().backward()
        out_g.square().sum().backward()
        opt_c.step()
        opt_g.step()
    torch.testing.assert_close(gpu.weight.detach().cpu(), cpu.weight.detach(), rtol=1e-5, atol=1e-6)
    if opt_name != "sgd":
        torch.testing.assert_close(opt_g.momentum.cpu(), opt_c.momentum, rtol=1e-5, atol=1e-6)


def test_forwards_without_backward_do_not_pile_up():
    ebc = EmbeddingBagCollection([TableConfig("a", 10)], 4)
    batch = JaggedBatch.from_lists({"a": [[1, 2]]})
    for _ in range(5):
        ebc(batch)  # graph dropped at once: no backward will ever come
    assert len(ebc._pending) == 1
    out = ebc(batch)
    out.sum().backward(retain_graph=True)
    out.sum().backward()  # two backwards through one output add up
    torch.testing.assert_close(ebc.row_gradients().grads, torch.full((2, 4), 2.0))


def reference_sparse_update(weight, state, ids, offsets, coef, grad, lr, optimizer, eps=1e-8):
    """Plain PyTorch: dense weight gradient by index_add_ per lookup, then update touched rows
    (``optimizer``: ``"sgd"``, ``"rowwise_adagrad"`` or ``"adagrad"``, the exact one)."""
    bags = torch.repeat_interleave(torch.arange(offsets.numel() - 1), offsets[1:] - offsets[:-1])
    per_lookup = grad[bags] * (coef.unsqueeze(1) if coef is not None else 1.0)
    g = torch.zeros(weight.shape, dtype=torch.float64).index_add_(0, ids, per_lookup.double())
    touched = torch.unique(ids)
    if optimizer == "rowwise_adagrad":
        state[touched] += g[touched].square().mean(1).float()
        weight[touched] -= (lr * g[touched] / (state[touched].double().sqrt() + eps).unsqueeze(1)).float()
    elif optimizer == "adagrad":
        state[touched] += g[touched].square().float()
        weight[touched] -= (lr * g[touched] / (state[touched].double().sqrt() + eps)).float()
    else:
        weight[touched] -= (lr * g[touched]).float()
    return touched.numel()


@given(
    rows=st.integers(1, 70_000),
    lookups=st.integers(0, 300),
    hot=st.integers(1, 40),
    bags=st.integers(1, 20),
    weighted=st.booleans(),
    optimizer=st.sampled_from(list(OPTIMIZERS)),
    seed=st.integers(0, 10_000),
    as_int32=st.booleans(),
)
def test_fused_step_matches_plain_pytorch_update(
    rows, lookups, hot, bags, weighted, optimizer, seed, as_int32
):
    """Both kernels (the Adagrads' bucketed one, row-wise and exact, rows spanning several
    buckets; SGD's lookup by lookup), hot rows repeated, empty bags, against a float64
    scatter-add reference;
    identical on 1 and 2 threads, on PyTorch's OpenMP threads and on Numba's (a few ulps
    apart between the two), int64 and int32 ids; SGD's scratch bit map left all zero."""
    import recnotebooks.kernels.fused as fused
    import recnotebooks.kernels.fused_adagrad as fused_adagrad

    gen = torch.Generator().manual_seed(seed)
    pool = torch.randint(0, rows, (hot,), generator=gen)  # few distinct rows, many repeats
    ids = pool[torch.randint(0, hot, (lookups,), generator=gen)]
    cuts = torch.sort(torch.randint(0, lookups + 1, (bags - 1,), generator=gen)).values
    offsets = torch.cat([torch.tensor([0]), cuts, torch.tensor([lookups])])
    coef = torch.rand(lookups, generator=gen) if weighted else None
    grad = torch.randn(bags, 4, generator=gen)
    w0 = torch.randn(rows, 4, generator=gen)
    s0 = torch.rand(rows, 4, generator=gen) if optimizer == "adagrad" else torch.rand(rows, generator=gen)
    adagrad = optimizer != "sgd"
    expected_w, expected_s = w0.clone(), s0.clone()
    n_ref = reference_sparse_update(expected_w, expected_s, ids, offsets, coef, grad, 0.1, optimizer)
    results = []
    for threads, team in itertools.product((1, 2), ("torch_openmp", "numba")):
        w, s = w0.clone(), s0.clone()
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            with contextlib.ExitStack() as stack:
                if team == "numba":  # both kernels' Numba-thread versions
                    for module in (fused, fused_adagrad):
                        stack.enter_context(mock.patch.object(module, "torch_openmp", lambda: None))
                dt = torch.int32 if as_int32 else torch.int64
                n = fused.fused_step(
                    w, ids.to(dt), offsets.to(dt), coef, grad, 0.1, s if adagrad else None, 1e-8
                )
        finally:
            torch.set_num_threads(before)
        assert n == n_ref
        assert not fused._seen.any()
        results.append((w, s))
    tol = 1e-6 + 2e-7 * lookups  # float32 sums of up to `lookups` terms vs a float64 reference
    torch.testing.assert_close(results[0][0], expected_w, rtol=1e-5, atol=tol)
    torch.testing.assert_close(results[0][1], expected_s, rtol=1e-5, atol=tol)
    # results: (1 thread, OpenMP), (1, Numba), (2, OpenMP), (2, Numba). Same bits on any
    # thread count on one pool; across pools the two compiled versions may round their
    # fast-math multiply-adds apart (a few float32 ulps)
    for (w1, s1), (w2, s2) in ((results[0], results[2]), (results[1], results[3])):
        assert torch.equal(w1, w2) and torch.equal(s1, s2)
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-6, atol=tol)
    torch.testing.assert_close(results[0][1], results[1][1], rtol=1e-6, atol=tol)
    if not adagrad:  # SGD without its distinct-row count: the same update, bit for bit
        w = w0.clone()
        assert fused.fused_step(w, ids, offsets, coef, grad, 0.1, count_rows=False) == -1
        assert torch.equal(w, results[0][0]) and not fused._seen.any() and not fused._NO_SEEN.any()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("team", ["torch_openmp", "numba"])
def test_sgd_kernel_over_many_tables_and_bag_blocks_matches_reference(
    threads, weighted, index_dtype, team, monkeypatch
):
    """SGD's lookup-by-lookup kernel where its work split matters: ids one table after
    another over many blocks of 256 bags (blocks skipped by the chunks that own none of their
    rows, blocks that straddle a chunk boundary), hot rows repeated, a row count that does
    not split evenly; its scratch bit map is left all zero. On PyTorch's OpenMP threads and
    on Numba's, int64 and int32 ids."""
    import recnotebooks.kernels.fused as fused

    if team == "numba":
        monkeypatch.setattr(fused, "torch_openmp", lambda: None)
    elif fused.torch_openmp() is None:
        pytest.skip("PyTorch's OpenMP runtime not identified on this platform")
    gen = torch.Generator().manual_seed(threads)
    sizes, batch = [5000, 3, 70_001, 64], 700  # 4 tables x 700 bags = 11 blocks
    starts = torch.tensor([0, *sizes]).cumsum(0)
    lens = torch.randint(0, 6, (len(sizes) * batch,), generator=gen)
    per_table = lens.view(len(sizes), batch).sum(1)
    local = [torch.randint(0, s, (int(n),), generator=gen) for s, n in zip(sizes, per_table, strict=True)]
    local[2][::2] %= 20  # half of table 2's lookups on 20 hot rows; it spans both chunks' rows
    ids = torch.cat([starts[t] + x for t, x in enumerate(local)])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    coef = torch.rand(ids.numel(), generator=gen) if weighted else None
    grad = torch.randn(len(sizes) * batch, 8, generator=gen)
    w0 = torch.randn(int(starts[-1]), 8, generator=gen)
    want = w0.clone()
    n_ref = reference_sparse_update(want, torch.zeros(0), ids, offsets, coef, grad, 0.1, "sgd")
    w, before = w0.clone(), torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert fused.fused_step(w, ids.to(index_dtype), offsets.to(index_dtype), coef, grad, 0.1) == n_ref
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(w, want, rtol=1e-5, atol=1e-5)
    assert not fused._seen.any()


def test_fused_step_declines_what_it_cannot_run():
    import recnotebooks.kernels.fused as fused

    ids, offsets, grad = torch.tensor([0]), torch.tensor([0, 1]), torch.ones(1, 2)
    assert fused.fused_step(torch.zeros(3, 2, dtype=torch.float64), ids, offsets, None, grad, 0.1) is None
    assert fused.fused_step(torch.zeros(4, 2)[:, :1].expand(4, 2), ids, offsets, None, grad, 0.1) is None
    w = torch.zeros(3, 2)
    for state in (torch.zeros(3, 3), torch.zeros(2), torch.zeros(2, 3).t(), torch.zeros(6)[::2]):
        before = state.clone()  # a state of another shape, or one it could update only in a copy
        assert fused.fused_step(w, ids, offsets, None, grad, 0.1, state, 1e-8) is None
        assert torch.equal(state, before) and not w.any()


def test_can_run_says_exactly_where_the_fused_kernel_runs(monkeypatch):
    """``can_run`` is False for what the kernels cannot take (switched off, not float32, not
    contiguous, a gradient or coefficients of another shape, a state it cannot update in place),
    True otherwise; ``fused_step`` runs exactly where it is True."""
    import recnotebooks.kernels.fused as fused

    ids, offsets, grad, w = torch.tensor([0, 2]), torch.tensor([0, 1, 2]), torch.ones(2, 2), torch.zeros(3, 2)
    assert fused.can_run(w, ids, offsets, None, grad)
    assert fused.can_run(w, ids, offsets, torch.ones(2), grad, torch.zeros(3))  # row-wise Adagrad
    assert fused.can_run(w, ids, offsets, None, grad, torch.zeros(3, 2))  # exact Adagrad
    cannot = [
        (w.double(), ids, offsets, None, grad.double(), None),
        (w.half(), ids, offsets, None, grad, None),
        (w.bfloat16(), ids, offsets, None, grad, None),
        (w, ids, offsets, None, grad.double(), None),
        (torch.zeros(4, 2)[:, :1].expand(4, 2), ids, offsets, None, grad, None),
        (w, ids, offsets, None, torch.ones(3, 2), None),  # a gradient row per bag
        (w, ids, offsets, torch.ones(3), grad, None),  # a coefficient per lookup
        (w, ids, offsets, None, grad, torch.zeros(3, dtype=torch.float64)),
        (w, ids, offsets, None, grad, torch.zeros(2)),
        (w, ids, offsets, None, grad, torch.zeros(2, 3).t()),
        (w, ids, offsets, None, grad, torch.zeros(6)[::2]),
    ]
    for args in cannot:
        assert not fused.can_run(*args)
        weight, before = args[0], args[0].clone()
        assert fused.fused_step(*args[:5], 0.1, args[5], 1e-8) is None and torch.equal(weight, before)
    monkeypatch.setattr(fused, "ENABLED", False)  # RECNB_FUSED=0
    assert not fused.can_run(w, ids, offsets, None, grad)


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_each_path_runs_where_can_run_says_and_both_give_the_same_update(opt_name, monkeypatch):
    """One random batch, one step through each path, forced: the fused kernel where ``can_run``
    holds (the torch update made to fail, so it cannot be what ran), the torch update where
    ``can_run`` is made False (the kernel made to fail). The updates agree within 1e-6, and a
    float64 collection, which the kernel cannot take, takes the torch path by itself."""
    import recnotebooks.kernels.fused as fused

    def refuse(*args, **kwargs):
        raise AssertionError("the other path ran")

    rows, gen = [50, 8, 200], torch.Generator().manual_seed(11)
    batch = random_batch(rows, 16, 6, gen, weighted=True)
    up = torch.randn(16, len(rows), 8, generator=gen)
    after = {}
    for path in ("fused", "torch"):
        ebc = EmbeddingBagCollection([TableConfig(f"t{i}", r) for i, r in enumerate(rows)], 8, seed=5)
        opt = OPTIMIZERS[opt_name](ebc, 0.2)
        (ebc(batch) * up).sum().backward()
        with monkeypatch.context() as m:
            if path == "fused":
                p = ebc.pending_lookups()
                assert fused.can_run(ebc.weight, p.ids, p.offsets, p.coef, p.grad, opt._state())
                m.setattr(type(opt), "_update", refuse)
            else:
                m.setattr(fused, "can_run", lambda *args: False)
                m.setattr(fused, "fused_step", refuse)
            assert opt.step() == len(torch.unique(ebc.global_ids(batch).long()))
        after[path] = (ebc.weight.detach().clone(), getattr(opt, "momentum", torch.zeros(1)).clone())
    assert not torch.equal(after["fused"][0], EmbeddingBagCollection(ebc.tables, 8, seed=5).weight)
    torch.testing.assert_close(after["fused"][0], after["torch"][0], rtol=0, atol=1e-6)
    torch.testing.assert_close(after["fused"][1], after["torch"][1], rtol=0, atol=1e-6)
    ebc = EmbeddingBagCollection(
        [TableConfig(f"t{i}", r) for i, r in enumerate(rows)], 8, seed=5, dtype=torch.float64
    )
    opt = OPTIMIZERS[opt_name](ebc, 0.2)
    (ebc(batch) * up.double()).sum().backward()
    p = ebc.pending_lookups()
    assert not fused.can_run(ebc.weight, p.ids, p.offsets, p.coef, p.grad, opt._state())
    monkeypatch.setattr(fused, "fused_step", refuse)
    opt.step()
    torch.testing.assert_close(ebc.weight.float(), after["torch"][0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_step_without_the_row_count_applies_the_same_update(opt_name, kernel_path):
    """``step(count_rows=False)`` (the trainer's) returns None and updates the weights and
    the optimizer state bit for bit as a counted step; ``count_rows`` must be a bool."""
    from recnotebooks.nn.optim import make_sparse_optimizer

    gen = torch.Generator().manual_seed(5)
    rows = [40, 9000]
    batch = random_batch(rows, 16, 5, gen, weighted=False)
    upstream = torch.randn(16, 2, 6, generator=gen)
    out = []
    for count in (True, False):
        ebc = EmbeddingBagCollection([TableConfig(f"t{i}", r) for i, r in enumerate(rows)], 6, seed=2)
        opt = make_sparse_optimizer(opt_name, ebc, 0.3)
        (ebc(batch) * upstream).sum().backward()
        n = opt.step(count_rows=count)
        assert (n is None) == (not count) and (n is None or n > 0)
        out.append((ebc.weight.detach().clone(), opt.state_dict()))
    assert torch.equal(out[0][0], out[1][0])
    if opt_name != "sgd":
        assert torch.equal(out[0][1]["momentum"], out[1][1]["momentum"])
    with pytest.raises(TypeError, match="count_rows must be True or False, got 1"):
        opt.step(count_rows=bad(1))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_accumulated_weighted_forwards_match_reference_sgd(mode, kernel_path):
    """Two forwards (one weighted) before one step: ids, bags and coefficients of both are
    concatenated (``pending_lookups``); the update must equal autograd + SGD per table."""
    gen = torch.Generator().manual_seed(11)
    rows = [25, 6000, 3]
    ebc = EmbeddingBagCollection([TableConfig(f"t{i}", r) for i, r in enumerate(rows)], 5, mode, seed=4)
    ref = reference_bags(ebc, mode)
    b1 = random_batch(rows, 4, 6, gen, weighted=True)
    b2 = random_batch(rows, 3, 6, gen, weighted=False)
    up1, up2 = torch.randn(4, 3, 5, generator=gen), torch.randn(3, 3, 5, generator=gen)
    ((ebc(b1) * up1).sum() + (ebc(b2) * up2).sum()).backward()
    SparseSGD(ebc, 0.2).step()
    ((reference_forward(ref, b1) * up1).sum() + (reference_forward(ref, b2) * up2).sum()).backward()
    for i, key in enumerate(ebc.keys):
        expected = ref[i].weight.detach() - 0.2 * ref[i].weight.grad
        torch.testing.assert_close(ebc.table_weight(key), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_a_recorded_dense_gradient_updates_every_row_as_plain_pytorch_does(opt_name, kernel_path) -> None:  # type: ignore[no-untyped-def]
    """What a data-parallel replica does with its all-reduced gradient: every row updated by its
    own gradient row (the Adagrads' state too), against the plain float64 reference."""
    gen = torch.Generator().manual_seed(3)
    ebc = EmbeddingBagCollection([TableConfig("t0", 7), TableConfig("t1", 3)], 4, "mean", seed=0)
    grad = torch.randn(10, 4, generator=gen)
    w0 = ebc.weight.detach().clone()
    opt = OPTIMIZERS[opt_name](ebc, 0.1)
    ebc(random_batch([7, 3], 5, 2, gen, False))  # a forward without backward: replaced, not added
    ebc.record_dense_gradient(grad)
    assert opt.step() == 10
    want_w, want_s = w0.clone(), torch.zeros(10) if opt_name == "rowwise_adagrad" else torch.zeros(10, 4)
    ids, offsets = torch.arange(10), torch.arange(11)
    reference_sparse_update(want_w, want_s, ids, offsets, None, grad, 0.1, opt_name)
    torch.testing.assert_close(ebc.weight.detach(), want_w, rtol=1e-5, atol=1e-6)
    if opt_name != "sgd":
        torch.testing.assert_close(opt.momentum, want_s, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="weight's shape"):
        ebc.record_dense_gradient(torch.zeros(9, 4))


def test_initial_weight_is_the_dlrm_uniform_drawn_in_chunks(monkeypatch) -> None:
    """The initial weight, drawn chunk by chunk across table boundaries, equals a straight
    implementation of the rule (one generator; row ``r`` of table ``t`` scaled to
    ``U(-1/sqrt(rows_t), 1/sqrt(rows_t))``), and is within those bounds."""
    monkeypatch.setattr(embedding_module, "INIT_CHUNK_ROWS", 4)
    rows, dim, seed = [3, 9, 1, 6], 5, 11
    ebc = EmbeddingBagCollection([TableConfig(f"t{i}", r) for i, r in enumerate(rows)], dim, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    bound = torch.tensor([1.0 / r**0.5 for r in rows for _ in range(r)], dtype=torch.float64)
    total = sum(rows)
    want = torch.cat([torch.rand(min(4, total - lo), dim, generator=gen) for lo in range(0, total, 4)])
    want = (want * 2 - 1) * bound[:, None].float()
    assert torch.equal(ebc.weight.detach(), want)
    for i, r in enumerate(rows):
        assert float(ebc.table_weight(f"t{i}").abs().max()) <= 1.0 / r**0.5
    chunks = list(embedding_module.initial_rows(rows, dim, seed))
    assert [lo for lo, _ in chunks] == [0, 4, 8, 12, 16]
    assert torch.equal(torch.cat([u for _, u in chunks]), want)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_each_sparse_optimizer_keeps_the_state_per_row_the_model_prices(name):
    """The names and state per row of ``recnotebooks.config`` (which ``perf`` prices) are what
    ``nn.optim`` builds: counted from the optimizer's real state tensors."""
    from recnotebooks.config import SPARSE_OPTIMIZERS, state_floats_per_row
    from recnotebooks.nn.optim import make_sparse_optimizer

    assert name in SPARSE_OPTIMIZERS
    ebc = EmbeddingBagCollection([TableConfig("t0", 30), TableConfig("t1", 7)], 4)
    opt = make_sparse_optimizer(name, ebc, 0.1)
    assert opt.kind == name
    state = [v for v in opt.state_dict().values() if isinstance(v, torch.Tensor)]
    assert sum(v.numel() for v in state) == 37 * state_floats_per_row(name, 4)
    assert all(v.dtype == torch.float32 for v in state)  # fp32, as the memory model counts it


def test_the_row_store_follows_the_weight_through_moves_and_loads() -> None:
    """The collection's rows store (MemoryRows) reads the very parameter torch moved or a load assigned."""
    tables = [TableConfig("a", 5), TableConfig("b", 3)]
    ebc = EmbeddingBagCollection(tables, 4, seed=1).double()
    assert ebc.rows.weight is ebc.weight and ebc.table_weight("b").dtype == torch.float64
    assert torch.equal(ebc.table_weight("b"), ebc.weight.detach()[5:])
    other = EmbeddingBagCollection(tables, 4, seed=2).double()
    ebc.load_state_dict(other.state_dict(), assign=True)
    assert ebc.rows.weight is ebc.weight and torch.equal(ebc.table_weight("a"), other.weight.detach()[:5])
    state = ebc.new_row_state("momentum", 0.5)
    assert state.shape == (8,) and state.device == ebc.weight.device
    ebc.reset_parameters(seed=2)  # written into the parameter the store holds now
    assert torch.equal(
        ebc.weight.detach(), EmbeddingBagCollection(tables, 4, seed=2).weight.detach().double()
    )
