"""The Training Job Planner's algorithms: a model, a data set, a deadline and a budget → a plan.

A *setting* names the job (model, samples per epoch, epochs), its constraints (deadline, budget)
and the plan (hardware preset, nodes x devices, sharding strategy, placement, cache size and
policy, global batch, precision, and the software that runs the step): one value of each of
:data:`JOB_SETTINGS`. Everything here is **modeled** (:func:`recnotebooks.perf.estimate` and
:mod:`recnotebooks.perf.job`):

* :func:`evaluate`: one setting's step, job (time, cost, energy) and whether it is feasible
  (fits in memory, meets the deadline and the budget), or why it cannot be built;
* :func:`best_lever`: each lever of :data:`LEVERS` moved one notch and the speed-up it gives;
* :func:`nearest_feasible`: the nearest feasible setting (fewest changes, the same hardware first;
  the cheapest of those);
* :func:`plan_job`: all three for one setting (:class:`JobPlan`), with the setting to show when
  this one cannot be built — never nothing;
* :func:`convergence_jobs`: the model of record (DLRM-DCNv2) trained to MLPerf's quality target at
  each global batch of MLPerf's convergence curve, on a few layouts of nodes x devices.

The software is whose step :func:`~recnotebooks.perf.estimate` prices (:data:`SOFTWARE_OPTIONS`):
TorchRec's eager PyTorch step, or NVIDIA's HugeCTR as MLPerf's submissions ran it (one CUDA-graph
replay a step, fused elementwise work, communication overlapped with compute). A model starts as
its source trains it (:func:`job_setup`): the model of record, DLRM-DCNv2, as MLPerf's submissions
do (HugeCTR, MLPerf's sharding plan, fp16 mixed precision: :data:`~recnotebooks.perf.published.MLPERF_SETUP`),
so its step is the one notebooks 02 and 05 price; every other model with TorchRec.

How many epochs a job trains is a setting: a number (explicit, as the job is given), or
:data:`TO_TARGET` for a model with a published convergence curve (:data:`CONVERGENCE_MODELS`):
then the epochs are those MLPerf's reference runs needed to reach the target at the job's global
batch (:func:`recnotebooks.published.convergence.epochs_to_converge`, **published**), and a batch off the
curve cannot be planned (:func:`job_epochs` says why).

The planner app of notebook 06 (:mod:`recnotebooks.viz.planner`) draws these; using them needs
no chart or widget library.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from recnotebooks.checks import check_choice, check_int
from recnotebooks.config import DLRMConfig, preset, preset_names, preset_training
from recnotebooks.perf.access import CACHE_POLICIES
from recnotebooks.perf.components import HUGECTR_DTYPES
from recnotebooks.perf.cost import CostResult, estimate
from recnotebooks.perf.hardware import HARDWARE, hardware
from recnotebooks.perf.hardware import hardware as _hardware  # convergence_jobs' parameter hides it
from recnotebooks.perf.job import CRITEO_TERABYTE_SAMPLES, JobCost, job_from_estimate
from recnotebooks.perf.mlperf_plan import mlperf_plan
from recnotebooks.perf.planner import STRATEGIES, plan_tables
from recnotebooks.perf.precision import precision
from recnotebooks.perf.published import MLPERF_SETUP, mlperf_seconds
from recnotebooks.plan import PLACEMENTS, Plan
from recnotebooks.published.convergence import (
    DEFAULT_ROUND,
    TRAIN_SAMPLES,
    epochs_to_converge,
    rules_for_round,
)

__all__ = ["CONVERGENCE_MODELS", "JOB_MODELS", "JOB_SETTINGS", "LEVERS", "MLPERF_STRATEGY",
           "PRECISION_OPTIONS", "SOFTWARE_OPTIONS", "SOURCE_SETUPS", "TO_TARGET", "JobPlan", "Outcome",
           "best_lever", "check_settings", "lever_helps", "MIN_GAIN", "convergence_jobs", "describe_change",
           "epochs_words", "evaluate",
           "job_epochs", "job_model", "job_optimizers", "job_setup", "nearest_feasible", "plan_job",
           "setting_values", "software_words", "CONVERGENCE_LAYOUTS", "FIXED_COMPONENTS"]  # fmt: skip

#: The planner's models, ``(label, name)``: presets, and production-scale mlperf_v1 with 10x or
#: 30x the rows (:func:`job_model`).
JOB_MODELS = [("tiny (8 small tables)", "tiny"), ("Criteo Kaggle", "criteo_kaggle"),
              ("Criteo Terabyte", "criteo_terabyte"), ("MLPerf DLRM v1 (~100 GB)", "mlperf_v1"),
              ("MLPerf DLRM-DCNv2 (~100 GB, 214 lookups)", "mlperf_dcnv2"),
              ("production: mlperf_v1 x10 (~1 TB)", "mlperf_v1_x10"),
              ("production: mlperf_v1 x30 (~3 TB)", "mlperf_v1_x30")]  # fmt: skip
#: The ``epochs`` setting that trains to MLPerf's quality target: the epochs MLPerf's reference runs
#: needed at the job's global batch (:func:`job_epochs`).
TO_TARGET = "to_target"
#: The models with a published convergence curve (MLPerf's reference convergence points are
#: DLRM-DCNv2's on Criteo 1TB, :mod:`recnotebooks.published.convergence`): :data:`TO_TARGET` applies to these.
CONVERGENCE_MODELS = ("mlperf_dcnv2",)
#: hardware presets, oldest and smallest first (one notch = the next one along)
_HARDWARE = ["this_machine", *(h for h in HARDWARE if h != "this_machine")]
#: How training runs: fp32, TF32 GEMMs, or autocast (AMP). Pure bf16/fp16 (every byte halved, no
#: fp32 master weights) is the model's lower bound, not a way to train, so it is not offered.
PRECISION_OPTIONS = [("fp32", "fp32"), ("tf32", "tf32"), ("AMP bf16", "amp_bf16"), ("AMP fp16", "amp_fp16")]
#: Whose training step is priced (:func:`~recnotebooks.perf.estimate`'s ``implementation``):
#: TorchRec's DistributedModelParallel in eager PyTorch (an operator launch each, every elementwise
#: pass its own kernel, communication after compute), or NVIDIA's HugeCTR as MLPerf's DLRM-DCNv2
#: submissions ran it (:data:`~recnotebooks.perf.components.ops.HUGECTR`: one CUDA-graph replay a
#: step, elementwise work fused into the GEMMs, grouped all-to-alls overlapped with compute). The
#: model prices HugeCTR's step as those submissions ran it: every table in HBM (its embeddings
#: train on the GPUs; the planner's caches, host DRAM and parameter servers are TorchRec's) and in
#: one of :data:`~recnotebooks.perf.components.ops.HUGECTR_DTYPES` (no bf16).
SOFTWARE_OPTIONS = [("TorchRec (eager PyTorch)", "torchrec"),
                    ("HugeCTR (MLPerf's: CUDA graphs, fused)", "hugectr")]  # fmt: skip
#: The sharding strategy that is MLPerf's plan (:func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`:
#: small tables data-parallel, the busiest split row-wise, the rest whole, every table in HBM), what
#: HugeCTR's planner builds for MLPerf's runs; the others are :data:`~recnotebooks.perf.planner.STRATEGIES`.
MLPERF_STRATEGY = "mlperf"
#: Every setting of a job: its ``options`` (values, or ``(label, value)`` pairs) and default ``value``.
JOB_SETTINGS: dict[str, dict[str, object]] = {
    "model": {"options": JOB_MODELS, "value": "mlperf_v1"},
    "samples": {"options": [("Criteo Kaggle: 45.8 M", 45_840_617), ("100 M", 100_000_000),
                            ("Criteo Terabyte: 4.2 B", CRITEO_TERABYTE_SAMPLES), ("10 B", 10_000_000_000)],
                "value": CRITEO_TERABYTE_SAMPLES},
    "epochs": {"options": [*((str(e), e) for e in (1, 2, 3, 5, 10)), ("to MLPerf's AUC target", TO_TARGET)],
               "value": 1},
    "deadline_h": {"options": [1, 2, 4, 8, 12, 24, 48, 72, 168], "value": 24},
    "budget_usd": {"options": [10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000], "value": 3000},
    "hardware": {"options": _HARDWARE, "value": "dgx_h100"},
    "nodes": {"options": [1, 2, 4, 8], "value": 1},
    "gpus": {"options": [1, 2, 4, 8], "value": 8},
    "strategy": {"options": [*STRATEGIES, MLPERF_STRATEGY], "value": "cost"},
    "placement": {"options": list(PLACEMENTS), "value": "hbm"},
    "cache_fraction": {"options": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5], "value": 0.05},
    "cache_policy": {"options": list(CACHE_POLICIES), "value": "lru"},
    "batch_size": {"options": [2**i for i in range(12, 19)], "value": 65536},
    "dtype": {"options": PRECISION_OPTIONS, "value": "fp32"},
    "software": {"options": SOFTWARE_OPTIONS, "value": "torchrec"},
}  # fmt: skip
#: The settings a model starts from when its source trains it another way than :data:`JOB_SETTINGS`'
#: defaults (:func:`job_setup`): DLRM-DCNv2 as MLPerf's submissions train it
#: (:data:`~recnotebooks.perf.published.MLPERF_SETUP`: HugeCTR in fp16 mixed precision; MLPerf's plan).
SOURCE_SETUPS: dict[str, dict[str, object]] = {
    "mlperf_dcnv2": {"software": MLPERF_SETUP["implementation"], "strategy": MLPERF_STRATEGY,
                     "dtype": MLPERF_SETUP["dtype"]},
}  # fmt: skip
#: Settings a learner can turn to change the job (the others describe the job itself).
LEVERS = ("nodes", "gpus", "batch_size", "dtype", "placement", "cache_fraction", "cache_policy", "strategy",
          "hardware", "software")  # fmt: skip
_ORDERED = ("nodes", "gpus", "batch_size", "cache_fraction", "hardware")


def setting_values(name: str) -> list[object]:
    """The values setting ``name`` allows (labels of ``(label, value)`` options dropped)."""
    spec = JOB_SETTINGS[check_choice("setting", name, list(JOB_SETTINGS))]
    return [o[1] if isinstance(o, tuple) else o for o in spec["options"]]  # type: ignore[attr-defined]


def job_model(name: str) -> DLRMConfig:
    """The planner's models: presets, and production-scale mlperf_v1 with 10x or 30x the rows."""
    check_choice("model", name, setting_values("model"))
    base, _, scale = name.partition("_x")
    return preset(base).with_rows_scale(int(scale)) if scale else preset(name)


def job_optimizers(name: str) -> dict[str, str]:
    """The optimizers the planner prices model ``name`` with: its source's (a preset's
    :data:`~recnotebooks.config.PRESET_TRAINING`, e.g. exact Adagrad on mlperf_dcnv2's tables, whose
    state is a second table the size of the first), else row-wise Adagrad on the tables and Adagrad
    on the dense part (:func:`~recnotebooks.perf.estimate`'s defaults). A production-scale
    ``"<preset>_x<scale>"`` trains as its preset does."""
    base = check_choice("model", name, setting_values("model")).partition("_x")[0]
    how = preset_training(base) if base in preset_names() else {}
    return {
        "sparse_optimizer": str(how.get("sparse_optimizer", "rowwise_adagrad")),
        "dense_optimizer": str(how.get("dense_optimizer", "adagrad")),
    }


def job_setup(name: str) -> dict[str, object]:
    """The settings model ``name`` starts from, as its source trains it: :data:`SOURCE_SETUPS`'
    (mlperf_dcnv2: ``{"software": "hugectr", "strategy": "mlperf", "dtype": "amp_fp16"}``, as MLPerf's
    submissions), else none (:data:`JOB_SETTINGS`' defaults: TorchRec, the cost planner, fp32)."""
    return dict(SOURCE_SETUPS.get(check_choice("model", name, setting_values("model")), {}))  # type: ignore[call-overload]


def software_words(values: dict[str, object]) -> str:
    """Which software a setting's step is priced as, in words (for a note)."""
    if values["software"] == "hugectr":
        words = (
            "HugeCTR as MLPerf's submissions ran it (one CUDA-graph replay a step, elementwise work fused "
            "into the GEMMs, communication overlapped with compute: the step is the longer of the two, "
            "shorter than the components' sum)"
        )
    else:
        words = "TorchRec in eager PyTorch (a launch per operator, communication after compute)"
    if job_setup(str(values["model"])).get("software") == "hugectr" and values["software"] != "hugectr":
        words += "; MLPerf's submissions ran this model with HugeCTR"
    return words


def check_settings(values: dict[str, object]) -> dict[str, object]:
    """Every setting: the defaults of :data:`JOB_SETTINGS`, the model's :func:`job_setup` over them,
    and ``values`` over those, each checked (``ValueError`` naming a value a setting does not allow;
    ``KeyError`` for an unknown setting)."""
    unknown = sorted(set(values) - set(JOB_SETTINGS))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; the planner has {sorted(JOB_SETTINGS)}")
    out = {k: spec["value"] for k, spec in JOB_SETTINGS.items()}
    out.update(job_setup(check_choice("model", values.get("model", out["model"]), setting_values("model"))))
    for k, v in values.items():
        out[k] = check_choice(k, v, setting_values(k))
    return out


def job_epochs(values: dict[str, object]) -> float:
    """The epochs a setting trains: its ``epochs`` when a number (explicit); for :data:`TO_TARGET`,
    the epochs MLPerf's reference runs needed to reach the target at its ``batch_size``
    (:func:`~recnotebooks.published.convergence.epochs_to_converge`, rules of
    :data:`~recnotebooks.published.convergence.DEFAULT_ROUND`). ``ValueError`` says why :data:`TO_TARGET`
    does not apply: a model without a curve (not one of :data:`CONVERGENCE_MODELS`), samples per
    epoch other than Criteo 1TB's (the curve counts its epochs), or a batch off the curve."""
    epochs = values["epochs"]
    if epochs != TO_TARGET:
        return float(epochs)  # type: ignore[arg-type]
    model = values["model"]
    if model not in CONVERGENCE_MODELS:
        raise ValueError(
            f"epochs={TO_TARGET!r} applies to {', '.join(CONVERGENCE_MODELS)} only (MLPerf's reference "
            f"convergence points are DLRM-DCNv2's on Criteo 1TB); give {model} an epoch count"
        )
    if values["samples"] != TRAIN_SAMPLES:
        raise ValueError(
            f"epochs={TO_TARGET!r} counts epochs of Criteo 1TB, {TRAIN_SAMPLES:,} samples (MLPerf's "
            f"convergence curve is in its epochs); samples per epoch must be that, got {values['samples']:,}"
        )
    return epochs_to_converge(int(values["batch_size"]))  # type: ignore[call-overload]


def epochs_words(values: dict[str, object]) -> str:
    """How many epochs a setting trains and where the number comes from, in words (for a note):
    ``"0.781: what MLPerf's reference runs needed ..."`` or ``"3, as set (explicit)"``."""
    epochs = job_epochs(values)
    if values["epochs"] == TO_TARGET:
        return (
            f"{epochs:.3f}, what MLPerf's reference runs needed to reach its AUC target at global batch "
            f"{int(values['batch_size']):,} (PUBLISHED convergence points, {DEFAULT_ROUND} rules, linear "  # type: ignore[call-overload]
            "between them)"
        )
    words = f"{epochs:g}, as set (explicit)"
    if values["model"] in CONVERGENCE_MODELS:
        words += "; \"to MLPerf's AUC target\" takes them from MLPerf's convergence curve"
    return words


@dataclass(frozen=True)
class Outcome:
    """One setting, modeled: the step (None when it cannot be built), the job, and why not."""

    values: dict[str, object]
    result: CostResult | None
    job: JobCost | None
    problem: str | None  # the setting cannot be built (e.g. more devices than a node has): the first reason
    #: every rule of building the setting it breaks (``problem`` first); empty when it builds
    problems: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.result is not None and self.result.fits

    @property
    def feasible(self) -> bool:
        """Fits in memory, meets the deadline and stays within the budget."""
        v = self.values
        return self.fits and self.job is not None and self.job.meets(v["deadline_h"], v["budget_usd"])  # type: ignore[arg-type]

    def why_not(self) -> list[str]:
        """What makes the setting infeasible, in words (empty when it is feasible)."""
        if self.problem or self.result is None or self.job is None:
            return list(self.problems or [self.problem or "the setting could not be modeled"])
        why = [] if self.fits else ["does not fit: " + "; ".join(self.result.memory.reasons)]
        if self.job.hours > float(self.values["deadline_h"]):  # type: ignore[arg-type]
            why.append(f"misses the deadline: {self.job.hours:,.3g} h > {self.values['deadline_h']} h")
        if self.job.cost_usd > float(self.values["budget_usd"]):  # type: ignore[arg-type]
            why.append(f"over budget: USD {self.job.cost_usd:,.0f} > USD {self.values['budget_usd']:,}")
        return why


def _cached_plan(plan: Plan, config: DLRMConfig, fraction: float, policy: str) -> Plan:
    """Every cache shard of ``plan`` with ``fraction`` of its rows as device slots under ``policy``
    (the model computes its hit rate from the skew: :func:`recnotebooks.perf.access.hit_rate`)."""
    rows = {t.name: t.num_rows for t in config.tables}
    shards = tuple(
        dataclasses.replace(
            s,
            cache_hit_rate=None,
            cache_policy=policy,
            cache_rows=max(1, round(fraction * rows[s.table] * s.row_fraction)),
        )
        if s.placement == "cache"
        else s
        for s in plan.shards
    )
    return dataclasses.replace(plan, shards=shards)


def _rules_broken(v: dict[str, object]) -> list[str]:
    """Every rule of building a setting that ``v`` breaks, in words (checked before modeling it, so
    that a setting breaking several says each, not only the first): epochs to a target without a
    curve, more devices than a node has, a table off HBM or bf16 under HugeCTR or MLPerf's plan,
    a precision the hardware has no peak for."""
    broken = []
    try:
        job_epochs(v)
    except ValueError as e:  # epochs to a target this model or batch has no curve for
        broken.append(str(e))
    hw = hardware(str(v["hardware"]))
    gpus = int(v["gpus"])  # type: ignore[call-overload]
    if gpus > hw.devices:
        broken.append(f"a {hw.name} node has {hw.devices} device(s), not {gpus}")
    if v["software"] == "hugectr" or v["strategy"] == MLPERF_STRATEGY:  # tables in HBM only
        try:
            _check_in_hbm("placement", v["placement"], v)
        except ValueError as e:
            broken.append(str(e))
    if v["software"] == "hugectr" and v["dtype"] not in HUGECTR_DTYPES:
        broken.append(
            f"dtype must be one of {list(HUGECTR_DTYPES)} with software 'hugectr' (HugeCTR trains in "
            "fp32, with TF32 GEMMs or in fp16 mixed precision; it has no bf16 mode), got "
            f"{v['dtype']!r}; choose one of those or software 'torchrec'"
        )
    gemm = precision(str(v["dtype"])).gemm
    try:
        hw.flops(gemm)
    except ValueError:
        broken.append(
            f"dtype={v['dtype']!r} runs its GEMMs in {gemm}, which {hw.name} has no peak for "
            f"(it has {sorted(hw.peak_flops)}); choose another dtype"
        )
    return broken


@lru_cache(maxsize=4096)
def _evaluate(key: tuple[tuple[str, object], ...]) -> Outcome:
    v = dict(key)
    broken = _rules_broken(v)
    if broken:
        return Outcome(v, None, None, broken[0], tuple(broken))
    epochs = job_epochs(v)
    hw = hardware(str(v["hardware"]))
    gpus, nodes = int(v["gpus"]), int(v["nodes"])  # type: ignore[call-overload]
    config = job_model(str(v["model"]))
    optimizers = job_optimizers(str(v["model"]))
    software = str(v["software"])
    try:
        if v["strategy"] == MLPERF_STRATEGY:
            plan = mlperf_plan(config, gpus, nodes, hw.hbm_bytes)
        else:
            hit = 0.9 if v["placement"] == "cache" else None  # replaced by the modeled rate below
            plan = plan_tables(
                config,
                hw,
                gpus * nodes,
                strategy=str(v["strategy"]),
                placement=str(v["placement"]),
                cache_hit_rate=hit,
                batch_size=int(v["batch_size"]),  # type: ignore[call-overload]
                dtype=str(v["dtype"]),
                sparse_optimizer=optimizers["sparse_optimizer"],
            )
            plan = _cached_plan(plan, config, float(v["cache_fraction"]), str(v["cache_policy"]))  # type: ignore[arg-type]
        if software == "hugectr":  # the cost planner moves what fits in no device's HBM elsewhere
            moved = sorted({s.placement for s in plan.shards} - {"hbm"})
            if moved:
                _check_in_hbm("the plan's tables", moved[0], v)
        r = estimate(
            config,
            hw,
            batch_size=int(v["batch_size"]),  # type: ignore[call-overload]
            gpus=gpus,
            nodes=nodes,
            plan=plan,
            dtype=str(v["dtype"]),
            implementation=software,
            **optimizers,
        )
    except ValueError as e:  # a combination the planner or the model cannot build, in its words
        return Outcome(v, None, None, str(e), (str(e),))
    job = job_from_estimate(r, hw, float(v["samples"]), epochs, overlap=software == "hugectr")  # type: ignore[arg-type]
    return Outcome(v, r, job, None)


def _check_in_hbm(what: str, placement: object, v: dict[str, object]) -> None:
    """``ValueError`` naming ``what`` when ``placement`` is not HBM under a setting that keeps every
    table there: software HugeCTR (priced as MLPerf's runs, tables in HBM) or MLPerf's plan."""
    hugectr = v["software"] == "hugectr"
    who = (
        "software 'hugectr' (the model prices HugeCTR's step as MLPerf's submissions ran it, every table in "
        "HBM; device caches, host DRAM and parameter servers are TorchRec's)"
        if hugectr
        else f"strategy {MLPERF_STRATEGY!r} (MLPerf's plan keeps every table in HBM)"
    )
    other = "software 'torchrec'" if hugectr else "another strategy"
    if what == "placement":
        fix = f"choose placement 'hbm' or {other}"
    else:  # the cost planner moved tables out of HBM
        fix = f"they fit in no device's HBM here: add devices or choose {other}"
    try:
        check_choice(what, placement, ["hbm"])
    except ValueError as e:
        raise ValueError(f"{e} with {who}; {fix}") from None


def evaluate(**values: object) -> Outcome:
    """The modeled outcome of one setting (settings checked; results reused for a repeated setting)."""
    return _evaluate(tuple(sorted(check_settings(values).items())))


def _neighbours(values: dict[str, object], lever: str, notch: bool = True) -> list[object]:
    opts = setting_values(lever)
    i = opts.index(values[lever])
    if notch and lever in _ORDERED:
        return [opts[j] for j in (i - 1, i + 1) if 0 <= j < len(opts)]
    return [o for o in opts if o != values[lever]]


def best_lever(**values: object) -> tuple[dict[str, object] | None, list[dict[str, object]]]:
    """Each lever of :data:`LEVERS` moved one notch (the next value up or down; every other choice
    of a named option): the best by time to train among those that fit (None when it does not
    speed the job up by :data:`MIN_GAIN`: :func:`lever_helps`), and one row per lever
    (``lever``, ``change``, ``speedup`` = hours now / hours then, ``cost_ratio``, ``feasible``)."""
    now = evaluate(**values)
    if now.job is None:
        return None, []
    rows = []
    for lever in LEVERS:
        best = None
        for v in _neighbours(now.values, lever):
            o = evaluate(**{**now.values, lever: v})
            if o.fits and o.job is not None and (best is None or o.job.hours < best.job.hours):  # type: ignore[union-attr]
                best = o
        same = best is not None and best.job == now.job  # a lever with nothing to act on (no cache)
        if best is not None and best.job is not None and not same:
            rows.append(
                {
                    "lever": lever,
                    "change": f"{lever} {now.values[lever]}→{best.values[lever]}",
                    "speedup": now.job.hours / best.job.hours,
                    "cost_ratio": best.job.cost_usd / max(now.job.cost_usd, 1e-12),
                    "feasible": best.feasible,
                }
            )
    rows.sort(key=lambda r: -float(r["speedup"]))  # type: ignore[arg-type]
    return (rows[0] if rows and lever_helps(rows[0]) else None), rows


#: A lever helps when it makes the job at least this much faster (a gain that prints as "1.00x" is none).
MIN_GAIN = 1.005


def lever_helps(row: dict[str, object]) -> bool:
    """Whether a :func:`best_lever` row speeds the job up by at least :data:`MIN_GAIN`."""
    return float(row["speedup"]) >= MIN_GAIN  # type: ignore[arg-type]


#: Levers whose value only matters to a device cache: moved only where the plan has one.
_CACHE_LEVERS = ("cache_fraction", "cache_policy")


def _changed(v0: dict[str, object], changes: dict[str, object]) -> Outcome | None:
    """The setting ``v0`` with ``changes``, modeled; None when a cache lever moves without a cache
    (the same plan as without the change: nothing to try)."""
    v = {**v0, **changes}
    if any(k in _CACHE_LEVERS for k in changes) and v["placement"] != "cache":
        return None
    return evaluate(**v)


def _near_changes(v0: dict[str, object]) -> list[list[dict[str, object]]]:
    """The changes to ``v0`` :func:`nearest_feasible` tries, in tiers, nearest first: one change on
    the same hardware (any value of a lever, or of a job setting :func:`_job_fixes` names), two
    changes on the same hardware, one change of hardware, two changes one of which is the hardware
    (other hardware is the largest move: another machine, not another setting of this one)."""
    keys = [k for k in (*LEVERS, *_job_fixes(v0)) if k != "hardware"]
    alts = {k: _neighbours(v0, k, notch=False) for k in (*keys, "hardware")}
    return [
        [{k: x} for k in keys for x in alts[k]],
        [{a: x, b: y} for i, a in enumerate(keys) for b in keys[i + 1 :] for x in alts[a] for y in alts[b]],
        [{"hardware": h} for h in alts["hardware"]],
        [{"hardware": h, k: x} for h in alts["hardware"] for k in keys for x in alts[k]],
    ]


def nearest_feasible(**values: object) -> tuple[Outcome | None, str]:
    """The nearest feasible setting, and a sentence saying which.

    Nearest is the same hardware before another, then fewest changes: one change on the same
    hardware (any value of a lever: more nodes, another placement, precision...), else two changes
    on the same hardware, else one change of hardware, else two changes one of which is the
    hardware; among the feasible settings of the first tier that has one, the cheapest. When no
    setting within two changes is feasible: ``(fastest setting found that fits, why)``, or
    ``(None, why)`` when none fits."""
    now = evaluate(**values)
    v0 = now.values
    tried: list[Outcome] = []
    for tier in _near_changes(v0):  # a later tier is modeled only when no earlier one has a feasible setting
        outcomes = [o for o in (_changed(v0, c) for c in tier) if o is not None]
        tried += outcomes
        ok = [o for o in outcomes if o.feasible]
        if ok:
            best = min(ok, key=lambda o: o.job.cost_usd)  # type: ignore[union-attr]
            return best, "nearest feasible: " + describe_change(v0, best.values)
    fitting = [o for o in [now, *tried] if o.fits and o.job is not None]
    if not fitting:
        return None, "nothing within two changes fits in memory"
    fast = min(fitting, key=lambda o: o.job.hours)  # type: ignore[union-attr]
    j = fast.job
    return fast, (
        f"no setting within two changes meets the deadline and the budget; the fastest that fits "
        f"({describe_change(v0, fast.values)}) takes {j.hours:,.3g} h and costs "  # type: ignore[union-attr]
        f"USD {j.cost_usd:,.0f}"  # type: ignore[union-attr]
    )


def _job_fixes(v: dict[str, object]) -> tuple[str, ...]:
    """Settings of the job itself (not levers) that :func:`nearest_feasible` may change too: the one
    that makes :data:`TO_TARGET` impossible whatever the levers (a model without a curve, samples
    per epoch other than Criteo 1TB's). A batch off the curve is a lever's to fix."""
    if v["epochs"] != TO_TARGET:
        return ()
    if v["model"] not in CONVERGENCE_MODELS:
        return ("epochs",)
    return ("samples",) if v["samples"] != TRAIN_SAMPLES else ()


def describe_change(old: dict[str, object], new: dict[str, object]) -> str:
    """``"nodes 1→2, dtype fp32→amp_bf16"``: the settings ``new`` changes, or ``"no change"``."""
    return ", ".join(f"{k} {old[k]}→{new[k]}" for k in new if new[k] != old[k]) or "no change"


@dataclass(frozen=True)
class JobPlan:
    """One setting planned (:func:`plan_job`)."""

    #: The setting asked for.
    now: Outcome
    #: The setting whose step and job to show: ``now``, or (when ``now`` cannot be built) the
    #: nearest one, or a fallback that always builds (``fallback``).
    shown: Outcome
    #: The nearest feasible setting (else the fastest that fits) when ``now`` is infeasible.
    near: Outcome | None
    #: :func:`nearest_feasible`'s sentence ("" when ``now`` is feasible).
    near_sentence: str
    #: ``shown`` is the tiny model on one DGX H100 node: nothing within two changes fits.
    fallback: bool
    #: :func:`best_lever` of ``shown``: the best lever's row (None when no lever helps), all rows.
    lever: dict[str, object] | None
    lever_rows: list[dict[str, object]]


def _fallback(values: dict[str, object]) -> dict[str, object]:
    """The setting shown when nothing within two changes of ``values`` fits: the same job (samples,
    epochs, deadline, budget) of the tiny model with every other setting at its default (one DGX
    H100 node, TorchRec, the cost planner, tables in HBM, fp32), which always builds."""
    epochs = 1 if values["epochs"] == TO_TARGET else values["epochs"]  # tiny has no convergence curve
    job = {"samples": values["samples"], "epochs": epochs, "deadline_h": values["deadline_h"],
           "budget_usd": values["budget_usd"]}  # fmt: skip
    return check_settings({"model": "tiny", **job})


def plan_job(**values: object) -> JobPlan:
    """The verdict on one setting (``plan.now.feasible``, ``plan.now.why_not()``), the nearest
    feasible setting when it is not, the setting to show, and the levers (:class:`JobPlan`)."""
    now = evaluate(**values)
    near, sentence, fallback = None, "", False
    if not now.feasible:
        near, sentence = nearest_feasible(**now.values)
    shown = now
    if now.job is None:  # nothing to show for this setting itself: show the nearest one instead
        if near is None or near.job is None:  # nothing fits within two changes: a setting that always builds
            near = evaluate(**_fallback(now.values))
            fallback = True
            if near.job is None:  # the tiny model on one DGX H100 node with the defaults always builds
                raise ValueError(f"the planner could not model its fallback setting: {near.problem}")
        shown = near
    lever, rows = best_lever(**shown.values)
    return JobPlan(now, shown, near, sentence, fallback, lever, rows)


#: The components of a modeled step that do not grow with the global batch: the per-step overhead
#: (launching operators; none in HugeCTR's CUDA-graphed step), and the all-reduce and update of the
#: dense weights.
FIXED_COMPONENTS = ("overhead", "all_reduce", "dense_optimizer")
#: The layouts :func:`convergence_jobs` compares, ``(nodes, devices per node)``: one 8-GPU node, as
#: NVIDIA's single-node DLRM-DCNv2 submissions, and 8 of them (64 GPUs), as its multi-node ones.
CONVERGENCE_LAYOUTS = ((1, 8), (8, 8))


def convergence_jobs(
    *,
    model: str = "mlperf_dcnv2",
    hardware: str = "dgx_h100",
    layouts: tuple[tuple[int, int], ...] = CONVERGENCE_LAYOUTS,
    batches: tuple[int, ...] | None = None,
) -> list[dict[str, object]]:
    """``model`` trained to MLPerf's target as MLPerf's submissions train it, at each global batch of
    ``batches`` (default: the batches of MLPerf's reference convergence points,
    :func:`~recnotebooks.published.convergence.rules_for_round`, 32,768 to 160,000) on each layout
    ``(nodes, devices per node)`` of ``layouts`` of ``hardware``.

    The step is the one notebook 02 holds against MLPerf's published runs
    (:data:`~recnotebooks.perf.published.MLPERF_SETUP`: NVIDIA's HugeCTR, mixed precision, exact
    Adagrad; :func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`), **modeled**; the epochs are the
    curve's (:func:`job_epochs`, **published**); the run's minutes count its evaluations as MLPerf's
    do (:func:`~recnotebooks.perf.published.mlperf_seconds`). One row per layout and batch:
    ``layout``, ``nodes``, ``devices``, ``global_batch``, ``step_ms`` (communication overlapped, as
    HugeCTR runs it) and ``samples_per_s`` (training), ``epochs``, ``samples``, ``minutes`` (training
    and evaluations) and ``eval_minutes``, ``fixed_ms`` (the slowest rank's :data:`FIXED_COMPONENTS`,
    which a bigger batch shares among more samples) and ``fixed_share`` (of its step, not
    overlapped), ``bound_by``, ``fits``. A batch off the curve, a model without one, a layout a
    ``hardware`` node cannot hold or an unknown ``hardware`` raises ``ValueError`` naming it."""
    if batches is None:
        batches = tuple(sorted({p.batch_size for p in rules_for_round(DEFAULT_ROUND)}))
    if not batches or not layouts:
        raise ValueError(
            f"batches and layouts must be non-empty, got batches={batches!r}, layouts={layouts!r}"
        )
    batches = tuple(check_int(f"batches[{i}]", b, lo=1, hi=2**40) for i, b in enumerate(batches))
    hw = _hardware(check_choice("hardware", hardware, list(HARDWARE)))
    config = job_model(check_choice("model", model, setting_values("model")))
    epochs = {
        b: job_epochs({"model": model, "epochs": TO_TARGET, "samples": TRAIN_SAMPLES, "batch_size": b})
        for b in batches
    }
    rows = []
    for i, (nodes, gpus) in enumerate(layouts):
        nodes = check_int(f"layouts[{i}] nodes", nodes, lo=1, hi=1024)
        gpus = check_int(f"layouts[{i}] devices per node", gpus, lo=1, hi=hw.devices)
        plan = mlperf_plan(config, gpus, nodes, hw.hbm_bytes)
        for batch in batches:
            r = estimate(config, hw, batch_size=batch, gpus=gpus, nodes=nodes, plan=plan, **MLPERF_SETUP)
            train_s, eval_s = mlperf_seconds(r, epochs[batch], batch)
            slowest = max(r.per_rank, key=lambda c: sum(c.values()))
            fixed = sum(slowest[k] for k in FIXED_COMPONENTS)
            rows.append(
                {
                    "layout": f"{nodes * gpus} GPUs ({nodes} node{'s' if nodes > 1 else ''})",
                    "nodes": nodes,
                    "devices": nodes * gpus,
                    "global_batch": batch,
                    "step_ms": r.step_time_overlap * 1e3,
                    "samples_per_s": r.throughput_overlap,
                    "epochs": epochs[batch],
                    "samples": epochs[batch] * TRAIN_SAMPLES,
                    "minutes": (train_s + eval_s) / 60,
                    "eval_minutes": eval_s / 60,
                    "fixed_ms": fixed * 1e3,
                    "fixed_share": fixed / r.step_time,
                    "bound_by": max(slowest, key=lambda k: slowest[k]),
                    "fits": r.fits,
                    "source": "modeled",
                }
            )
    return rows
