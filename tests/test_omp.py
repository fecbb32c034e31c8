"""``recnotebooks.kernels.omp``: a Numba kernel run on PyTorch's own OpenMP threads."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

numba = pytest.importorskip("numba")

from recnotebooks.kernels import omp  # noqa: E402

needs_runtime = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or not torch.backends.openmp.is_available()
    or os.environ.get("RECNB_TORCH_OMP", "1") == "0",
    reason="PyTorch's GNU OpenMP runtime is looked for on Linux builds with OpenMP, unless switched off",
)


@numba.cfunc(numba.types.void(numba.types.voidptr), cache=True)
def _record_team(data):  # pragma: no cover - compiled
    """Each thread writes its team size into slot ``thread number`` of ``out``."""
    a = numba.carray(data, (4,), np.int64)
    out = numba.carray(omp.i64_ptr(a[0]), (a[1],))
    out[omp.call_int(a[2])] = omp.call_int(a[3])


@needs_runtime
def test_the_runtime_found_is_the_one_pytorch_has_loaded() -> None:
    rt = omp.torch_openmp()
    assert rt is not None
    probe = "import torch; from recnotebooks.kernels.omp import _mapped_libgomp; print(_mapped_libgomp())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded_by_torch = ast.literal_eval(out.stdout.strip().splitlines()[-1])  # before anything of ours ran
    same = [p for p in loaded_by_torch if Path(p).resolve() == Path(rt.path).resolve()]
    assert same, (rt.path, loaded_by_torch)
    torch_lib = Path(torch.__file__).parent / "lib"
    if list(torch_lib.glob("libgomp*.so*")):  # a pip wheel: its own copy, not the system's
        assert Path(rt.path).parent == torch_lib


@needs_runtime
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_run_on_openmp_runs_the_kernel_once_on_each_thread_of_the_team(threads: int) -> None:
    rt = omp.torch_openmp()
    assert rt is not None
    out = np.full(threads, -1, np.int64)
    args = np.array([omp.address(out), threads, rt.thread_num, rt.num_threads], np.int64)
    before = torch.get_num_threads()
    omp.run_on_openmp(rt, _record_team.address, args, threads)
    assert out.tolist() == [threads] * threads  # every thread ran, each saw the whole team
    assert torch.get_num_threads() == before


@needs_runtime
def test_run_on_openmp_refuses_an_argument_block_that_is_not_int64() -> None:
    rt = omp.torch_openmp()
    assert rt is not None
    with pytest.raises(TypeError, match="int64"):
        omp.run_on_openmp(rt, _record_team.address, np.zeros(4, np.int32), 1)


def test_the_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECNB_TORCH_OMP", "0")
    omp.torch_openmp.cache_clear()
    try:
        assert omp.torch_openmp() is None
    finally:
        monkeypatch.delenv("RECNB_TORCH_OMP")
        omp.torch_openmp.cache_clear()
