"""The prepared GPU check: every CUDA path of recnotebooks in one command, with a report.

No GPU was available while recnotebooks was built, so the code paths that only run on CUDA are
collected here, to run whenever a GPU machine is at hand::

    python benchmarks/gpu_check.py --out gpu-report          # on the GPU machine (<= 10 minutes)
    python benchmarks/gpu_check.py --out /tmp/r --self-test  # here: the same steps on the CPU, tiny

Each step is one subprocess with its own time limit (sized for the GPU run; the self-test's CPU
steps get it times the machine's load per core, :func:`cpu_share_factor`); a step that fails,
hangs or crashes is recorded and the next one still runs. The folder given by ``--out``
receives ``report.json`` (every step: command, status, seconds, its limit, exit code, the figures
it printed as JSON, the tail of its output) and ``report.md`` (the same as a table, for
BENCHMARKS.md). The exit status is 0 when no step failed.

Steps (``{device}`` is ``cuda`` on a GPU machine, ``cpu`` in the self-test):

1. ``environment``: torch and CUDA versions, the device's name and memory, NCCL's version.
2. ``gpu_tests``: ``pytest -m gpu`` (the embedding, cache, prefetch, trainer and CLI tests
   marked for CUDA); the self-test only collects them.
3. ``calibrate``: ``recnb calibrate --device {device} --quick --json`` (GEMM rate, gather and
   copy bandwidth, per-op overhead of the device, saved beside the CPU calibration).
4. ``validate``: ``recnb validate --device {device} --quick --saved --json`` (modeled vs measured
   step time over a sweep of architectures: MAPE and Spearman on this device; five passes,
   ``--repeats 5``; the self-test takes one, ``--repeats 1``).
5. ``train``: ``recnb train --device {device}`` on the ``criteo_kaggle`` preset capped to 100k
   rows per table (measured samples/s and phases; the self-test trains ``tiny``).
6. ``cached_step``: :func:`recnotebooks.measure.cache_overhead.measure_overhead` on the device (a step
   through the GPU embedding cache against the same step uncached).
7. ``nccl_sharding``: ``torchrun --nproc-per-node 1 -m recnotebooks train --distributed`` (NCCL on
   CUDA, gloo in the self-test): the sharded training entry on one GPU.

The calibration is written under ``--out`` (``$RECNB_CALIBRATION``), never over a saved one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

ENVIRONMENT = r"""
import json, torch
info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda}
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    info.update(device=p.name, memory_gib=round(p.total_memory / 2**30, 1),
                capability=f"{p.major}.{p.minor}", count=torch.cuda.device_count(),
                nccl=".".join(map(str, torch.cuda.nccl.version())))
print(json.dumps(info))
"""

CACHED_STEP = r"""
import json, sys
from recnotebooks.measure.cache_overhead import measure_overhead
from recnotebooks.cache.simulate import zipf_trace
rows, quick = int(sys.argv[1]), sys.argv[2] == "1"
trace = zipf_trace(rows, 200_000 if quick else 4_000_000, 1.05, seed=0)
res = measure_overhead(trace, rows, rows // 10, "lru", steps=5 if quick else 15,
                       batch_size=256 if quick else 4096, device=sys.argv[3])
print(json.dumps({"device": sys.argv[3], **res.to_dict()}))
"""


@dataclass(frozen=True)
class Step:
    """One check: a command, its time limit, and what the self-test runs instead."""

    name: str
    command: list[str]
    timeout_s: int
    what: str


def steps(device: str, self_test: bool) -> list[Step]:
    """The checks in order, for ``device`` (``cuda`` or, in the self-test, ``cpu``)."""
    recnb = [PY, "-m", "recnotebooks"]
    quick = "1" if self_test else "0"
    tests = [PY, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "tests"]
    big = ["--preset", "criteo_kaggle", "--max-rows", "100000", "--steps", "200", "--batch-size", "4096"]
    size = ["--preset", "tiny", "--steps", "20"] if self_test else big
    train = [*recnb, "train", "--device", device, *size, "--eval-batches", "1", "--json"]
    # the rendezvous store on a port the system picks (port 0), held by torchrun's agent from its
    # bind on, under an id of this run's own: a fixed port (29531 here once) fails with EADDRINUSE
    # whenever another check, test run or job on the machine holds it
    # the self-test checks that validate runs, not what it reads: one pass of the sweep, not
    # five (each re-measured once when the machine is busy), so that it stays the size of the
    # other steps beside another program's load (it was 30 s idle and 111 s beside two); a GPU
    # takes five, the passes this step's limit was sized for (validate's default of ten is for a
    # shared CPU's slow spells, and doubles the step on a lent GPU's clock)
    one_pass = ["--repeats", "1" if self_test else "5"]
    sharded = [PY, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "127.0.0.1:0", "--rdzv-id", f"recnb-gpu-check-{uuid.uuid4().hex[:12]}",
               "--local-addr", "127.0.0.1", "-m", "recnotebooks", "train", "--distributed",
               "--preset", "tiny", "--steps", "10" if self_test else "100", "--json"]  # fmt: skip
    return [
        Step("environment", [PY, "-c", ENVIRONMENT], 60, "torch, CUDA, device, NCCL versions"),
        Step("gpu_tests", tests + (["--collect-only"] if self_test else []), 300, "pytest -m gpu"),
        Step(
            "calibrate",
            [*recnb, "calibrate", "--device", device, "--quick", "--json"],
            120,
            "microbenchmarks of the device, saved under --out",
        ),  # fmt: skip
        Step(
            "validate",
            [*recnb, "validate", "--device", device, "--quick", "--saved", "--json", *one_pass],
            150,
            "modeled vs measured step time (MAPE, Spearman)",
        ),  # fmt: skip
        Step("train", train, 120, "measured training (criteo_kaggle, 100k rows per table)"),
        Step(
            "cached_step",
            [PY, "-c", CACHED_STEP, "20000" if self_test else "1000000", quick, device],
            120,
            "a step through the embedding cache vs uncached",
        ),  # fmt: skip
        Step("nccl_sharding", sharded, 120, "torchrun, one rank, the sharded training entry"),
    ]


def _figures(stdout: str) -> Any:
    """The last line of ``stdout`` that parses as JSON (or the whole output as one object)."""
    text = stdout.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def cpu_share_factor() -> float:
    """How many times longer CPU-bound work takes here now than on an idle machine, at most: the
    runnable processes per core over the last minute (``os.getloadavg``), at least 1. The
    self-test's steps run on this machine's CPU, shared with whatever else runs: on the 2-core
    host at load 7.5 its calibrate step took 63 s (9 s idle) and validate 102 s, close to and,
    in a test-suite run beside other work, past their limits, which are sized for the GPU run."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average on this system
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def run_step(step: Step, env: dict[str, str], scale: float = 1.0) -> dict[str, Any]:
    """Run one step within ``scale`` times its limit (the self-test: :func:`cpu_share_factor`);
    never raises (a timeout or crash is the step's result)."""
    t0 = time.perf_counter()
    limit = step.timeout_s * scale
    try:
        p = subprocess.run(step.command, cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=limit, check=False)  # fmt: skip
        rc, out, err = p.returncode, p.stdout, p.stderr
        status = "pass" if rc == 0 else "fail"
    except subprocess.TimeoutExpired as e:
        rc, status = None, "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    return {"step": step.name, "what": step.what, "status": status, "exit_code": rc,
            "seconds": round(time.perf_counter() - t0, 2), "limit_s": round(limit, 1),
            "command": " ".join(step.command),
            "figures": _figures(out), "tail": (out + err)[-3000:]}  # fmt: skip


def markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown table (one row per step)."""
    lines = [f"GPU check ({report['mode']}, device {report['device']}, {report['date']}): "
             f"{report['passed']}/{len(report['steps'])} steps passed in {report['seconds']:.0f} s", "",
             "| step | what | status | seconds |", "|---|---|---|---:|"]  # fmt: skip
    lines += [f"| {s['step']} | {s['what']} | {s['status']} | {s['seconds']:.1f} |" for s in report["steps"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run every step, write ``report.json`` and ``report.md`` under ``--out``; 0 if none failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for report.json, report.md and the calibration")
    ap.add_argument("--self-test", action="store_true", help="the same steps on the CPU, tiny (no GPU)")
    ap.add_argument("--only", nargs="+", default=None, help="run only these steps")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    if not args.self_test and not torch.cuda.is_available():
        print("no CUDA device here: run on a GPU machine, or pass --self-test", file=sys.stderr)
        return 2
    device = "cpu" if args.self_test else "cuda"
    todo = steps(device, args.self_test)
    names = [s.name for s in todo]
    if args.only is not None and set(args.only) - set(names):
        ap.error(f"--only must name steps among {names}, got {args.only}")
    todo = [s for s in todo if args.only is None or s.name in args.only]
    env = {**os.environ, "RECNB_CALIBRATION": str(out / "calibration.json"), "PYTHONUNBUFFERED": "1"}
    t0, results = time.perf_counter(), []
    for s in todo:
        # the GPU run's limits hold on a GPU; the self-test's CPU steps get them times the share
        # of the CPU other programs leave them (measured before each step)
        results.append(run_step(s, env, cpu_share_factor() if args.self_test else 1.0))
        print(f"{s.name:15s} {results[-1]['status']:8s} {results[-1]['seconds']:7.1f} s", flush=True)
    report = {"mode": "self-test" if args.self_test else "gpu", "device": device,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "steps": results,
              "passed": sum(r["status"] == "pass" for r in results),
              "seconds": time.perf_counter() - t0}  # fmt: skip
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "report.md").write_text(markdown(report))
    print(markdown(report))
    return 0 if report["passed"] == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
