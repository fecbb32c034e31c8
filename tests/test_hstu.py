"""HSTU on jagged histories against a padded plain-PyTorch reference written from the paper's
formula (Zhai et al. 2024, Section 3.1): forward and gradients, empty, length-1 and full-length
histories, and the checks at the door."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from recnotebooks.kernels import jagged_attention
from recnotebooks.kernels.jagged_attention import BucketAttention, JaggedAttention, buckets, padded_length
from recnotebooks.nn.hstu import HSTU, HSTULayer, hstu_attention, time_buckets

DIM, HEADS, MAX_LEN = 16, 2, 12
#: The readable path (one history at a time) and the bucketed one (kernels.jagged_attention).
PATHS = {"readable": "0", "bucketed": "1"}


@pytest.fixture(autouse=True)
def _restore_fused_switch() -> Iterator[None]:
    before = os.environ.get("RECNB_FUSED")
    yield
    if before is None:
        os.environ.pop("RECNB_FUSED", None)
    else:
        os.environ["RECNB_FUSED"] = before


def jagged(
    lengths: list[int], dim: int = DIM, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens, offsets and non-decreasing timestamps (seconds) for histories of ``lengths``."""
    g = torch.Generator().manual_seed(seed)
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    x = torch.randn(int(offsets[-1]), dim, generator=g)
    gaps = torch.randint(0, 5000, (int(offsets[-1]),), generator=g)
    ts = torch.cat(
        [gaps[s:e].cumsum(0) + 1_700_000_000 for s, e in zip(offsets[:-1], offsets[1:], strict=True)]
    )
    return x, offsets, ts.to(torch.int64) if len(ts) else torch.zeros(0, dtype=torch.int64)


def reference_layer(
    layer: HSTULayer, x: torch.Tensor, offsets: torch.Tensor, ts: torch.Tensor | None
) -> torch.Tensor:
    """The layer on a padded ``(B, N, dim)`` batch, every sum written out: what a padded
    implementation computes, then the padding dropped."""
    n_max, b = layer.max_len, len(offsets) - 1
    lengths = (offsets[1:] - offsets[:-1]).tolist()
    xp = torch.zeros(b, n_max, layer.dim)
    tp = torch.zeros(b, n_max, dtype=torch.int64)
    for i, (s, n) in enumerate(zip(offsets[:-1].tolist(), lengths, strict=True)):
        xp[i, :n] = x[s : s + n]
        if ts is not None:
            tp[i, :n] = ts[s : s + n]
    h, dq, dv = layer.heads, layer.qk_dim, layer.v_dim
    proj = F.silu(F.layer_norm(xp, [layer.dim], eps=layer.eps) @ layer.uvqk.weight.T + layer.uvqk.bias)
    u, v, q, k = proj.split([h * dv, h * dv, h * dq, h * dq], dim=-1)
    q, k, v = q.view(b, n_max, h, dq), k.view(b, n_max, h, dq), v.view(b, n_max, h, dv)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(dq)
    i = torch.arange(n_max)
    if layer.bias is not None:
        dist = (i[:, None] - i[None, :]).clamp(min=0)
        bias = layer.bias.position[dist].expand(b, n_max, n_max).clone()
        if ts is not None:
            for bi, n in enumerate(lengths):
                if n:
                    nxt = torch.cat([tp[bi, 1:n], tp[bi, n - 1 : n]])  # next event's time, last its own
                    gap = (nxt[:, None] - tp[bi, None, :n]).abs().clamp(min=1).double()
                    bucket = torch.floor(torch.log2(gap)).long().clamp(max=layer.bias.num_buckets)
                    bias[bi, :n, :n] += layer.bias.time[bucket]
        scores = scores + bias[:, None]
    lens = torch.tensor(lengths)
    valid = (i[None, :, None] < lens[:, None, None]) & (i[None, None, :] <= i[None, :, None])  # causal
    weights = F.silu(scores) / n_max * valid[:, None]
    attn = torch.einsum("bhij,bjhd->bihd", weights, v).reshape(b, n_max, h * dv)
    y = xp + (F.layer_norm(attn, [h * dv], eps=layer.eps) * u) @ layer.out.weight.T + layer.out.bias
    return torch.cat([y[bi, :n] for bi, n in enumerate(lengths)]) if lengths else y.reshape(0, layer.dim)


def assert_grad_close(ours: torch.Tensor, ref: torch.Tensor) -> None:
    """Within 1e-5 of the gradient's own scale: a bias weight's gradient sums thousands of fp32
    terms, whose order (a scatter-add here, an indexed accumulate there) moves its last bits."""
    scale = max(1.0, float(ref.abs().max())) if ref.numel() else 1.0
    torch.testing.assert_close(ours, ref, atol=1e-5 * scale, rtol=1e-5)


def _grads(model: torch.nn.Module, x: torch.Tensor, out: torch.Tensor) -> list[torch.Tensor]:
    w = torch.linspace(-1, 1, out.numel()).view_as(out)
    params = [x, *model.parameters()]
    grads = torch.autograd.grad(
        (out * w).sum(), params, allow_unused=True
    )  # time weights unused without timestamps
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]


@pytest.mark.parametrize("lengths", [[5, 0, 1, 12], [12, 12], [1], [0, 3], [7, 2, 9, 4, 1], [0, 0]])
@pytest.mark.parametrize("with_time", [True, False])
@pytest.mark.parametrize("relative_bias", [True, False])
@pytest.mark.parametrize("path", PATHS)
def test_layer_equals_padded_reference(
    lengths: list[int], with_time: bool, relative_bias: bool, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECNB_FUSED", PATHS[path])
    torch.manual_seed(1)
    layer = HSTULayer(DIM, HEADS, MAX_LEN, relative_bias=relative_bias)
    x, offsets, ts = jagged(lengths)
    x.requires_grad_(True)
    t = ts if with_time else None
    ours, ref = layer(x, offsets, t), reference_layer(layer, x, offsets, t)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    for g_ours, g_ref in zip(_grads(layer, x, ours), _grads(layer, x, ref), strict=True):
        assert_grad_close(g_ours, g_ref)


@settings(max_examples=15, deadline=None)
@given(
    lengths=st.lists(st.integers(0, MAX_LEN), min_size=1, max_size=6),
    heads=st.sampled_from([1, 2, 4]),
    seed=st.integers(0, 2**16),
)
@pytest.mark.parametrize("path", PATHS)
def test_stack_equals_reference_layer_by_layer(lengths: list[int], heads: int, seed: int, path: str) -> None:
    os.environ["RECNB_FUSED"] = PATHS[path]  # restored by the autouse fixture below
    torch.manual_seed(seed)
    model = HSTU(DIM, num_layers=2, heads=heads, max_len=MAX_LEN)
    x, offsets, ts = jagged(lengths, seed=seed)
    x.requires_grad_(True)
    ref = x
    for layer in model.layers:
        ref = reference_layer(layer, ref, offsets, ts)
    ours = model(x, offsets, ts)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    for g_ours, g_ref in zip(_grads(model, x, ours), _grads(model, x, ref), strict=True):
        assert_grad_close(g_ours, g_ref)


def test_a_history_does_not_see_its_future_or_its_neighbours() -> None:
    """Changing a later token of one history leaves its earlier outputs and other histories alone."""
    torch.manual_seed(0)
    model = HSTU(DIM, num_layers=2, heads=HEADS, max_len=MAX_LEN)
    x, offsets, ts = jagged([6, 4])
    y = model(x, offsets, ts)
    x2 = x.clone()
    x2[4] += 10.0  # history 0, position 4
    y2 = model(x2, offsets, ts)
    torch.testing.assert_close(y2[:4], y[:4])
    torch.testing.assert_close(y2[6:], y[6:])
    assert not torch.allclose(y2[4], y[4])


def test_causal_attention_counts_half_the_products() -> None:
    """Under the causal mask position i attends to i + 1 positions: n (n + 1) / 2 weights."""
    n, h = 9, 1
    q = k = torch.ones(n, h, 4)
    v = torch.ones(n, h, 1)
    out = hstu_attention(q, k, v, torch.tensor([0, n]), max_len=n)
    weight = F.silu(torch.tensor(4 / 2.0)) / n  # alpha q.k = 4 / sqrt(4)
    torch.testing.assert_close(out.flatten(), weight * torch.arange(1, n + 1, dtype=torch.float32))


def test_time_buckets_are_log2_spaced() -> None:
    gaps = torch.tensor([0, 1, 2, 3, 4, 7, 8, -8, 2**40])
    assert time_buckets(gaps, num_buckets=32).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 32]


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        (torch.tensor([0, 3, 2, 5]), "never decrease"),
        (torch.tensor([0, 2, 4]), "from 0 to the number of values"),
        (torch.tensor([1, 5]), "from 0 to the number of values"),
        (torch.tensor([0]), "at least two"),
        (torch.tensor([0.0, 5.0]), "int32 or int64"),
        (torch.tensor([0, 5]).view(1, 2), "1-D"),
    ],
)
def test_bad_offsets_are_named(offsets: torch.Tensor, match: str) -> None:
    model = HSTU(DIM, num_layers=1, heads=HEADS, max_len=MAX_LEN)
    with pytest.raises((ValueError, TypeError), match=match):
        model(torch.randn(5, DIM), offsets)


def test_a_history_longer_than_max_len_is_refused() -> None:
    model = HSTU(DIM, num_layers=1, heads=HEADS, max_len=4)
    with pytest.raises(ValueError, match="piece 1 of offsets holds 5 values; at most 4"):
        model(torch.randn(7, DIM), torch.tensor([0, 2, 7]))


def test_timestamps_going_backwards_are_refused() -> None:
    model = HSTU(DIM, num_layers=1, heads=HEADS, max_len=MAX_LEN)
    x, offsets, ts = jagged([3, 4])
    model(x, offsets, ts)  # a new history may start earlier than the last one ended
    ts[5] = ts[4] - 1
    with pytest.raises(ValueError, match="history 1 goes from"):
        model(x, offsets, ts)
    with pytest.raises(ValueError, match="one per token"):
        model(x, offsets, ts[:-1])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dim": 10, "heads": 4}, ValueError, "heads must divide dim"),
        ({"heads": 0}, ValueError, "heads"),
        ({"max_len": 0}, ValueError, "max_len"),
        ({"num_layers": 0}, ValueError, "num_layers"),
        ({"dim": 2.5}, TypeError, "dim"),
    ],
)
def test_bad_shapes_are_named(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {"dim": DIM, "num_layers": 1, "heads": HEADS, "max_len": MAX_LEN, **kwargs}
    with pytest.raises(error, match=match):
        HSTU(**args)  # type: ignore[arg-type]


def test_bad_tokens_are_named() -> None:
    model = HSTU(DIM, num_layers=1, heads=HEADS, max_len=MAX_LEN)
    with pytest.raises(ValueError, match=r"x must be a floating-point \(L, 16\)"):
        model(torch.randn(5, DIM + 1), torch.tensor([0, 5]))


def test_buckets_pad_at_most_a_quarter_and_hold_every_history() -> None:
    lengths = [0, 1, 7, 8, 9, 31, 33, 100, 257, 4096, 4097]
    plan = buckets(lengths)
    assert sorted(b for members in plan.values() for b in members) == [i for i, n in enumerate(lengths) if n]
    for p, members in plan.items():
        for b in members:
            assert lengths[b] <= p <= max(lengths[b] + 7, lengths[b] * 1.25 + 1)
    assert padded_length(100) == 112 and padded_length(4097) == 4096 + 1024


@settings(max_examples=6, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 70), min_size=1, max_size=7),
    heads=st.sampled_from([1, 2]),
    with_time=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_bucketed_path_equals_readable_path_over_many_buckets(
    lengths: list[int], heads: int, with_time: bool, seed: int
) -> None:
    """Histories up to 70 events fall in buckets of 8 to 80: the fast path (one gather into
    per-bucket blocks, the mask and the bias in one lookup) against the readable one."""
    torch.manual_seed(seed)
    model = HSTU(DIM, num_layers=2, heads=heads, max_len=80)
    x, offsets, ts = jagged(lengths, seed=seed)
    x.requires_grad_(True)
    t = ts if with_time else None
    runs = {}
    for path, switch in PATHS.items():
        os.environ["RECNB_FUSED"] = switch  # restored by the autouse fixture
        out = model(x, offsets, t)
        runs[path] = (out, _grads(model, x, out))
    torch.testing.assert_close(runs["bucketed"][0], runs["readable"][0], atol=1e-5, rtol=1e-5)
    for g_fast, g_readable in zip(runs["bucketed"][1], runs["readable"][1], strict=True):
        assert_grad_close(g_fast, g_readable)


@settings(max_examples=10, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=8), heads=st.integers(1, 3))
def test_a_plan_gathers_every_row_into_its_bucket_and_back(lengths: list[int], heads: int) -> None:
    """``head_rows``: the rows gathered into ``(b, heads, P)`` blocks hold each history's tokens
    in order (padding past them), and the inverse gathers exactly the rows back."""
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int64)
    if offsets[-1] == 0:
        return
    batch = jagged_attention.plan(offsets)
    gather, back = batch.head_rows(heads)
    rows = torch.arange(int(offsets[-1]) * heads)
    assert torch.equal(rows.index_select(0, gather).index_select(0, back), rows)
    blocks = rows.index_select(0, gather).split([len(b.n) * heads * b.p for b in batch.buckets])
    seen = []
    for b, block in zip(batch.buckets, blocks, strict=True):
        for history, n in zip(block.view(-1, heads, b.p), b.n.tolist(), strict=True):
            assert n <= b.p and torch.equal(
                history[:, :n] % heads, torch.arange(heads)[:, None].expand(-1, n)
            )
            seen.extend((history[0, :n] // heads).tolist())
    assert sorted(seen) == list(range(int(offsets[-1])))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_the_additive_mask_is_an_exact_zero_and_so_is_its_gradient(dtype: torch.dtype) -> None:
    s = (torch.linspace(-50, 50, 101, dtype=dtype) + jagged_attention.MASKED).requires_grad_(True)
    w = F.silu(s)
    (g,) = torch.autograd.grad(w.sum(), s)
    assert torch.equal(w, torch.zeros_like(w)) and torch.equal(g, torch.zeros_like(g))


def test_float16_takes_the_readable_path() -> None:
    """float16 cannot hold the mask (its largest is 65,504): the fast path declines it."""
    assert not jagged_attention.can_run(torch.zeros(3, 2, 4, dtype=torch.float16))
    assert jagged_attention.can_run(torch.zeros(3, 2, 4))


@settings(max_examples=20, deadline=None)
@given(gaps=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30), num_buckets=st.integers(1, 40))
def test_log2_buckets_are_the_readable_time_buckets(gaps: list[int], num_buckets: int) -> None:
    """The fast path's time buckets (float64 exponent bits) against ``floor(log2)``, powers of
    two and their neighbours included."""
    edges = [s * (2**e + d) for e in range(0, 41, 3) for d in (-1, 0, 1) for s in (1, -1)]
    g = torch.tensor(gaps + edges, dtype=torch.int64)
    assert torch.equal(jagged_attention.log2_buckets(g, num_buckets), time_buckets(g, num_buckets))


@pytest.mark.parametrize(
    "scale",
    [
        pytest.param(lambda ts: ts, id="float32-gaps"),  # spans under 2^24 s
        pytest.param(lambda ts: ts * 1024 + 2**60, id="float64-gaps"),  # spans past 2^24, ~2^61 ns
        pytest.param(lambda ts: (ts - ts.min()) * 2**40, id="int64-gaps"),  # spans past 2^53
        pytest.param(lambda ts: ts.double(), id="float-timestamps"),
    ],
)
def test_every_way_of_taking_the_gaps_buckets_as_the_readable_path(
    scale: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    """The fast path takes a bucket's gaps (from each history's first event) in float32 where
    exact (spans under 2^24), in float64 (under 2^53), else in int64: the same buckets, so the
    same outputs, as the readable path's ``floor(log2)``."""
    torch.manual_seed(3)
    model = HSTU(DIM, num_layers=1, heads=HEADS, max_len=40)
    x, offsets, ts = jagged([33, 5, 17, 1])
    ts = scale(ts)
    outs = []
    for switch in PATHS.values():
        os.environ["RECNB_FUSED"] = switch  # restored by the autouse fixture
        outs.append(model(x, offsets, ts))
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)


def bucket_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    table: torch.Tensor,
    index: torch.Tensor,
    alpha: float,
    inv_n: float,
) -> torch.Tensor:
    """``silu(alpha Q K^T + table[index]) V / N`` by plain autograd."""
    scores = alpha * q @ k.transpose(-1, -2) + table[index.long()][:, None]
    return F.silu(scores) @ v * inv_n


@pytest.mark.parametrize("shared", [False, True])
def test_the_bucket_attention_function_passes_gradcheck(shared: bool) -> None:
    """:class:`BucketAttention`'s own backward against finite differences (float64) and its
    forward against plain autograd, on a tiny bucket (2 histories, 3 heads, P = 5), with a
    per-history index or one shared by the bucket (no timestamps)."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    v = torch.randn(2, 3, 5, 2, dtype=torch.float64, generator=g, requires_grad=True)
    table = torch.randn(7, dtype=torch.float64, generator=g, requires_grad=True)
    index = torch.randint(0, 7, (1 if shared else 2, 5, 5), generator=g, dtype=torch.int32)
    args = (q, k, v, table, index, 0.7, 1 / 9)
    torch.testing.assert_close(BucketAttention.apply(*args), bucket_reference(*args))
    assert torch.autograd.gradcheck(BucketAttention.apply, args)


def test_the_bucket_attention_function_masks_exactly() -> None:
    """Entries whose index reads :data:`MASKED` add nothing to the output, nor to any gradient."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 6, 3, generator=g, requires_grad=True) for _ in range(3))
    table = torch.tensor([0.1, -0.2, jagged_attention.MASKED], requires_grad=True)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    index = torch.where(causal, torch.randint(0, 2, (6, 6), generator=g), 2).to(torch.int32)[None]
    out = BucketAttention.apply(q, k, v, table, index, 0.5, 0.25)
    scores = 0.5 * q @ k.transpose(-1, -2) + table[:2][index.clamp(max=1).long()][:, None]
    ref = (F.silu(scores) * causal) @ v * 0.25
    torch.testing.assert_close(out, ref)
    w = torch.randn(out.shape, generator=g)
    grads = torch.autograd.grad((out * w).sum(), (q, k, v, table))
    grads_ref = torch.autograd.grad((ref * w).sum(), (q, k, v))
    for got, want in zip(grads, grads_ref, strict=False):
        torch.testing.assert_close(got, want)
    assert grads[3][2] == 0


@pytest.mark.parametrize("timed", [True, False])
def test_the_jagged_attention_function_passes_gradcheck(timed: bool) -> None:
    """:class:`JaggedAttention` (every bucket in one autograd node, its gradients gathered back
    with padding left out) against finite differences in float64 for ``q``, ``k``, ``v``, on
    histories in three buckets with padding, an empty and a length-1 history; its forward and
    the bias weights' gradients against the readable path's."""
    _, offsets, ts = jagged([5, 0, 1, 11, 17])
    times = ts if timed else None
    length, g = int(offsets[-1]), torch.Generator().manual_seed(2)
    q, k, v = (
        torch.randn(length, 2, 3, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(3)
    )
    bias = HSTULayer(6, 2, 24).bias.double()  # type: ignore[union-attr]
    batch = jagged_attention.plan(offsets, times)
    assert len(batch.buckets) == 3 and len(batch.padding(2)) > 0
    table, index_of = bias.lookup(timed)

    def fast(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return JaggedAttention.apply(q, k, v, table, batch, index_of, 0.6, 1 / 24)  # type: ignore[no-any-return]

    os.environ["RECNB_FUSED"] = "0"  # restored by the autouse fixture
    want = hstu_attention(q * (0.6 * math.sqrt(3)), k, v, offsets, 24, bias, times)
    got = fast(q, k, v)
    torch.testing.assert_close(got, want)
    w = torch.randn(got.shape, dtype=torch.float64, generator=g)
    weights = [bias.position, bias.time] if timed else [bias.position]
    ours = torch.autograd.grad((got * w).sum(), weights)
    for mine, ref in zip(ours, torch.autograd.grad((want * w).sum(), weights), strict=True):
        torch.testing.assert_close(mine, ref)
    assert torch.autograd.gradcheck(fast, (q, k, v), fast_mode=True)


def test_the_jagged_attention_frees_its_buffers_after_the_backward() -> None:
    """The scores and weights :class:`JaggedAttention` keeps are autograd's saved tensors: freed
    by the backward even while its output lives on (a caller keeping the outputs of a step
    does not keep every bucket's ``(b, heads, P, P)`` buffers), and a second backward is refused."""
    _, offsets, ts = jagged([5, 17])
    q, k, v = (torch.randn(22, 2, 3, requires_grad=True) for _ in range(3))
    bias = HSTULayer(6, 2, 24).bias
    assert bias is not None
    table, index_of = bias.lookup(True)
    out = JaggedAttention.apply(q, k, v, table, jagged_attention.plan(offsets, ts), index_of, 0.5, 0.1)
    assert len(out.grad_fn.saved_tensors) == 2 * 6  # two buckets
    out.sum().backward()
    with pytest.raises(RuntimeError, match="freed"):
        out.grad_fn.saved_tensors  # noqa: B018


def test_the_masked_entries_are_spread_one_a_distance() -> None:
    """Above the diagonal the bias index points at a masked entry per distance (no two of a row
    share one: their gradients' adds do not queue on one address), all reading :data:`MASKED`."""
    bias = HSTULayer(6, 2, 16).bias
    assert bias is not None
    _, offsets, ts = jagged([9, 14])
    batch = jagged_attention.plan(offsets, ts)
    table, index_of = bias.lookup(timed=True)
    for b in batch.buckets:
        index = index_of(b).long()
        above = torch.ones(b.p, b.p, dtype=torch.bool).triu(1).expand_as(index)
        assert torch.all(table[index[above]] == jagged_attention.MASKED)
        assert torch.all(table[index[~above]] != jagged_attention.MASKED)
        for row in index[0, :-1]:
            masked = row[row >= 16 * 33]
            assert len(masked.unique()) == len(masked) > 0


@pytest.mark.parametrize("path", ["readable", "fast"])
def test_both_paths_run_in_bfloat16_close_to_float32(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bfloat16 stack runs on either path (the readable one once mixed a float32 mask into
    bfloat16 einsums) and stays near the float32 stack of the same weights."""
    monkeypatch.setenv("RECNB_FUSED", "0" if path == "readable" else "1")
    torch.manual_seed(0)
    model = HSTU(32, 2, 2, 64)
    x = torch.randn(13, 32)
    offsets = torch.tensor([0, 1, 6, 13])
    times = torch.tensor([0, 0, 5, 9, 100, 4000, 0, 1, 2, 3, 50, 60, 61])
    want = model(x, offsets, times)
    got = model.to(torch.bfloat16)(x.to(torch.bfloat16), offsets, times)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, atol=0.1, rtol=0.05)
