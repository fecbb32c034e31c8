"""Row kernels: each CPU fast path against plain torch references."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from recnotebooks.kernels.allocator import advise_huge_pages
from recnotebooks.kernels.rows import first_out_of_range, shift_ids
from recnotebooks.nn.rows import group_by_row, segment_ids


@given(st.lists(st.integers(0, 4), min_size=1, max_size=30))
def test_segment_ids_match_repeat_interleave(lengths):
    lens = torch.tensor(lengths)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = lens.cumsum(0)
    n = int(lens.sum())
    got = segment_ids(offsets, n)
    assert torch.equal(got.long(), torch.repeat_interleave(torch.arange(len(lengths)), lens))


@given(st.lists(st.integers(0, 2**31 - 1), max_size=50), st.booleans())
def test_group_by_row_matches_sort(values, as_int32):
    ids = torch.tensor(values, dtype=torch.int64)
    if as_int32:
        ids = ids.to(torch.int32)
    bags = torch.arange(ids.numel())
    rows, counts, order = group_by_row(ids, bags)
    ref_rows, ref_counts = torch.unique(ids.long(), return_counts=True)
    assert torch.equal(rows, ref_rows) and torch.equal(counts, ref_counts)
    assert torch.equal(ids.long()[order], torch.repeat_interleave(ref_rows, ref_counts))
    assert sorted(order.tolist()) == list(range(ids.numel()))
    assert torch.equal(ids, ids.clone())  # input untouched


def test_group_by_row_large_ids_take_the_torch_path():
    ids = torch.tensor([2**40, 5, 2**40, 7])
    rows, counts, order = group_by_row(ids, torch.arange(4))
    assert rows.tolist() == [5, 7, 2**40] and counts.tolist() == [1, 1, 2]


def test_advise_huge_pages_is_safe():
    assert advise_huge_pages(torch.empty(10)) is False  # too small: no-op
    big = torch.empty(3 * (2 << 20) // 4)
    assert advise_huge_pages(big) in (True, False)


@given(
    st.lists(
        st.tuples(st.integers(1, 50), st.lists(st.integers(-3, 60), max_size=20)),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
    st.booleans(),
)
def test_shift_ids_matches_a_loop_and_finds_the_first_id_out_of_range(tables, as_int32, check):
    """Each table's ids shifted by its row offset (a plain loop as reference); the first id
    outside its own table's rows reported when checking, nothing when not."""

    sizes = [n for n, _ in tables]
    ids = [v for _, vs in tables for v in vs]
    dtype = torch.int32 if as_int32 else torch.int64
    vals = torch.tensor(ids, dtype=dtype)
    # strided, as global_ids passes it (every batch-size-th bag offset)
    starts = torch.stack([torch.tensor([0, *[len(vs) for _, vs in tables]]).cumsum(0)] * 2, 1)[:, 0]
    num_rows = torch.tensor(sizes)
    row_offsets = torch.tensor([0, *sizes]).cumsum(0)[:-1]
    got, bad = shift_ids(vals, starts, num_rows, row_offsets, check)
    assert got is not None  # the compiled kernel runs on CPU int tensors
    want, first_bad, j = [], -1, 0
    for t, (n, vs) in enumerate(tables):
        for v in vs:
            want.append(v + int(row_offsets[t]))
            if first_bad < 0 and not 0 <= v < n:
                first_bad = j
            j += 1
    assert bad == (first_bad if check else -1)
    if bad < 0:
        assert got.dtype == dtype and got.tolist() == want


def _shift_reference(vals: torch.Tensor, sizes: list[int], lengths: list[int]) -> tuple[list[int], int]:
    """Each table's ids plus its row offset, and the first id outside its table: a plain loop."""
    want, first_bad, j, off = [], -1, 0, 0
    flat = vals.tolist()
    for n, k in zip(sizes, lengths, strict=True):
        for v in flat[j : j + k]:
            want.append(v + off)
            if first_bad < 0 and not 0 <= v < n:
                first_bad = len(want) - 1
        j, off = j + k, off + n
    return want, first_bad


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_shift_ids_on_torchs_threads_matches_a_loop(threads: int, dtype: torch.dtype) -> None:
    """Above PARALLEL_SHIFT_IDS ids the shift runs on PyTorch's OpenMP team, a slice per thread:
    the same ids as a plain loop, and the first id out of range (not a later thread's) when
    ids are bad in several slices; empty tables and slices that split a table included."""
    import recnotebooks.kernels.rows as rows

    g = torch.Generator().manual_seed(0)
    sizes, lengths = [1000, 1, 70000, 5, 30000], [40000, 0, 50000, 7, 20001]
    vals = torch.cat([torch.randint(0, n, (k,), generator=g) for n, k in zip(sizes, lengths, strict=True)])
    vals = vals.to(dtype)
    starts = torch.tensor([0, *lengths]).cumsum(0)
    num_rows, row_offsets = torch.tensor(sizes), torch.tensor([0, *sizes]).cumsum(0)[:-1]
    assert vals.numel() >= rows.PARALLEL_SHIFT_IDS
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got, bad = shift_ids(vals, starts, num_rows, row_offsets)
        want, first = _shift_reference(vals, sizes, lengths)
        assert first == -1 and bad == -1 and got is not None and got.dtype == dtype and got.tolist() == want
        late, early = vals.numel() - 3, 41000  # in the last slice, and in table 2 (an earlier slice)
        for positions in ([late], [late, early]):
            broken = vals.clone()
            broken[positions] = -1
            _, bad = shift_ids(broken, starts, num_rows, row_offsets)
            assert bad == _shift_reference(broken, sizes, lengths)[1] == min(positions)
            assert shift_ids(broken, starts, num_rows, row_offsets, check=False)[1] == -1
    finally:
        torch.set_num_threads(before)


@given(
    st.lists(
        st.tuples(st.integers(1, 50), st.lists(st.integers(-3, 60), max_size=20)),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_first_out_of_range_finds_the_first_id_outside_its_table(tables, as_int32):
    """The position of the first id outside its own table's rows (a plain loop as reference), -1 when
    every id is in range; the ids are left as they were."""

    vals = torch.tensor([v for _, vs in tables for v in vs], dtype=torch.int32 if as_int32 else torch.int64)
    starts = torch.tensor([0, *[len(vs) for _, vs in tables]]).cumsum(0)
    before = vals.clone()
    got = first_out_of_range(vals, starts, torch.tensor([n for n, _ in tables]))
    assert got is not None  # the compiled kernel runs on CPU int tensors
    flat = [(v, n) for n, vs in tables for v in vs]
    assert got == next((j for j, (v, n) in enumerate(flat) if not 0 <= v < n), -1)
    assert torch.equal(vals, before)
    assert first_out_of_range(vals.float(), starts, torch.tensor([1])) is None  # not an index dtype
