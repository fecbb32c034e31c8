"""The Training Job Planner's algorithms: a model, a data set, a deadline and a budget → a plan.

A *setting* names the job (model, samples per epoch, epochs), its constraints (deadline, budget)
and the plan (hardware preset, nodes x devices, sharding strategy, placement, cache size and
policy, global batch, precision, and the software that runs the step): a :class:`JobSettings`,
one value of each of :data:`JOB_SETTINGS`, checked once and frozen. The functions below take it
as keywords (``evaluate(model="tiny", nodes=2)``) or as the value (``evaluate(settings)``).
Everything here is **modeled** (:func:`recnotebooks.perf.estimate` and :mod:`recnotebooks.perf.job`):

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
do (HugeCTR, MLPerf's sharding plan, fp16 mixed precision:
:data:`~recnotebooks.perf.mlperf_setup.MLPERF_SETUP`), so its step is the one notebooks 02 and 05
price; every other model with TorchRec.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypedDict

from recnotebooks.checks import check_choice, check_int, check_type
from recnotebooks.config import DLRMConfig, Workload, preset, preset_names, preset_training
from recnotebooks.perf.access import CACHE_POLICIES
from recnotebooks.perf.components import HUGECTR_DTYPES
from recnotebooks.perf.cost import CostResult, estimate
from recnotebooks.perf.explain import PlanExplanation, explain_plan
from recnotebooks.perf.hardware import HARDWARE, Hardware, hardware
from recnotebooks.perf.hardware import hardware as _hardware  # convergence_jobs' parameter hides it
from recnotebooks.perf.job import CRITEO_TERABYTE_SAMPLES, JobCost, job_from_estimate
from recnotebooks.perf.mlperf_plan import mlperf_plan
from recnotebooks.perf.mlperf_setup import MLPERF_SETUP, mlperf_seconds
from recnotebooks.perf.planner import STRATEGIES, Decision, plan_tables
from recnotebooks.perf.precision import precision
from recnotebooks.plan import PLACEMENTS, Plan, behind_cache
from recnotebooks.published.convergence import (
    DEFAULT_ROUND,
    TRAIN_SAMPLES,
    epochs_to_converge,
    rules_for_round,
)

__all__ = ["CONVERGENCE_MODELS", "JOB_MODELS", "JOB_SETTINGS", "LEVERS", "MLPERF_STRATEGY",
           "PRECISION_OPTIONS", "SOFTWARE_OPTIONS", "SOURCE_SETUPS", "TO_TARGET", "JobPlan", "Outcome",
           "best_lever", "check_settings", "lever_helps", "MIN_GAIN", "convergence_jobs", "describe_change",
           "epochs_words", "evaluate", "explain_outcome",
           "job_epochs", "job_model", "job_optimizers", "job_setup", "nearest_feasible", "plan_job",
           "setting_values", "software_words", "CONVERGENCE_LAYOUTS", "FIXED_COMPONENTS", "JobSettings",
           "LeverRow", "ConvergenceRow", "as_settings", "job_settings"]  # fmt: skip

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
#: Every setting's options: values, or ``(label, value)`` pairs (:func:`setting_values` drops the labels).
_OPTIONS: dict[str, list[object]] = {
    "model": list(JOB_MODELS),
    "samples": [("Criteo Kaggle: 45.8 M", 45_840_617), ("100 M", 100_000_000),
                ("Criteo Terabyte: 4.2 B", CRITEO_TERABYTE_SAMPLES), ("10 B", 10_000_000_000)],
    "epochs": [*((str(e), e) for e in (1, 2, 3, 5, 10)), ("to MLPerf's AUC target", TO_TARGET)],
    "deadline_h": [1, 2, 4, 8, 12, 24, 48, 72, 168],
    "budget_usd": [10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000],
    "hardware": list(_HARDWARE),
    "nodes": [1, 2, 4, 8],
    "gpus": [1, 2, 4, 8],
    "strategy": [*STRATEGIES, MLPERF_STRATEGY],
    "placement": list(PLACEMENTS),
    "cache_fraction": [0.01, 0.02, 0.05, 0.1, 0.2, 0.5],
    "cache_policy": list(CACHE_POLICIES),
    "batch_size": [2**i for i in range(12, 19)],
    "dtype": list(PRECISION_OPTIONS),
    "software": list(SOFTWARE_OPTIONS),
}  # fmt: skip
#: The planner's model names (the values of :data:`JOB_MODELS`).
_MODEL_NAMES = tuple(name for _, name in JOB_MODELS)


def setting_values(name: str) -> list[object]:
    """The values setting ``name`` allows (labels of ``(label, value)`` options dropped)."""
    options = _OPTIONS[check_choice("setting", name, list(_OPTIONS))]
    return [o[1] if isinstance(o, tuple) else o for o in options]


@dataclass(frozen=True)
class JobSettings:
    """One setting of the Training Job Planner: the job (model, samples per epoch, epochs), its
    constraints (deadline in hours, budget in USD) and the plan (hardware preset, nodes x devices
    per node, sharding strategy, placement, cache size and policy, global batch, precision and the
    software that runs the step). The defaults are :data:`JOB_SETTINGS`' values.

    Each field is checked once, at construction: a value its setting does not allow
    (:func:`setting_values`) raises ``ValueError`` naming the field and the values it allows.
    Frozen and hashable; :meth:`replace` moves levers. :meth:`from_values` starts a model as its
    source trains it (:func:`job_setup`), as the planner's entry points do.

    >>> s = JobSettings(model="tiny", nodes=2)
    >>> s.replace(dtype="amp_bf16").dtype, s.nodes
    ('amp_bf16', 2)
    """

    model: str = "mlperf_v1"
    samples: int = CRITEO_TERABYTE_SAMPLES
    #: a number of epochs, or :data:`TO_TARGET`
    epochs: int | str = 1
    deadline_h: int = 24
    budget_usd: int = 3000
    hardware: str = "dgx_h100"
    nodes: int = 1
    gpus: int = 8
    strategy: str = "cost"
    placement: str = "hbm"
    cache_fraction: float = 0.05
    cache_policy: str = "lru"
    batch_size: int = 65536
    dtype: str = "fp32"
    software: str = "torchrec"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # each the option it equals (1.0 is the option 1)
            object.__setattr__(
                self, f.name, check_choice(f.name, getattr(self, f.name), setting_values(f.name))
            )

    @classmethod
    def from_values(cls, **values: Any) -> JobSettings:
        """The defaults, the model's :func:`job_setup` over them, and ``values`` over those
        (``KeyError`` for a setting the planner does not have)."""
        _check_known(values)
        model = check_choice("model", values.get("model", cls.model), _MODEL_NAMES)
        merged: dict[str, Any] = {**job_setup(model), **values}  # checked by the constructor
        return cls(**merged)

    def replace(self, **changes: Any) -> JobSettings:
        """The same setting with ``changes`` (checked again; ``KeyError`` for an unknown setting)."""
        _check_known(changes)
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, object]:
        """The settings as keywords, in :data:`JOB_SETTINGS`' order (``evaluate(**s.as_dict())``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def workload(self) -> Workload:
        """What one step trains: the model (:func:`job_model`), the global batch, the precision
        and the model's optimizers (:func:`job_optimizers`)."""
        opt = job_optimizers(self.model)
        return Workload(
            job_model(self.model),
            self.batch_size,
            self.dtype,
            sparse_optimizer=opt["sparse_optimizer"],
            dense_optimizer=opt["dense_optimizer"],
        )


def _check_known(values: Mapping[str, object]) -> None:
    unknown = sorted(set(values) - set(_OPTIONS))
    if unknown:
        raise KeyError(f"unknown setting(s) {unknown}; the planner has {sorted(_OPTIONS)}")


#: Every setting of a job: its ``options`` (values, or ``(label, value)`` pairs) and default
#: ``value`` (:class:`JobSettings`' field defaults).
JOB_SETTINGS: dict[str, dict[str, object]] = {
    f.name: {"options": _OPTIONS[f.name], "value": f.default} for f in dataclasses.fields(JobSettings)
}
#: The settings a model starts from when its source trains it another way than :data:`JOB_SETTINGS`'
#: defaults (:func:`job_setup`): DLRM-DCNv2 as MLPerf's submissions train it
#: (:data:`~recnotebooks.perf.mlperf_setup.MLPERF_SETUP`: HugeCTR in fp16 mixed precision; MLPerf's plan).
SOURCE_SETUPS: dict[str, dict[str, object]] = {
    "mlperf_dcnv2": {"software": MLPERF_SETUP["implementation"], "strategy": MLPERF_STRATEGY,
                     "dtype": MLPERF_SETUP["dtype"]},
}  # fmt: skip
#: Settings a learner can turn to change the job (the others describe the job itself).
LEVERS = ("nodes", "gpus", "batch_size", "dtype", "placement", "cache_fraction", "cache_policy", "strategy",
          "hardware", "software")  # fmt: skip
_ORDERED = ("nodes", "gpus", "batch_size", "cache_fraction", "hardware")


def as_settings(values: JobSettings | Mapping[str, object]) -> JobSettings:
    """``values`` as :class:`JobSettings`: itself, or a mapping of settings through
    :meth:`JobSettings.from_values` (the functions below took a dict of settings before the class)."""
    if isinstance(values, JobSettings):
        return values
    if not isinstance(values, Mapping):
        raise TypeError(f"settings must be a JobSettings or a dict of settings, got {type(values).__name__}")
    return JobSettings.from_values(**values)


def job_settings(settings: JobSettings | None = None, /, **values: object) -> JobSettings:
    """The setting an entry point plans: ``settings`` with ``values`` changed, or (without
    ``settings``) :meth:`JobSettings.from_values` of ``values``."""
    if settings is None:
        return JobSettings.from_values(**values)
    check_type("settings", settings, JobSettings, "a JobSettings (or settings as keywords)")
    return settings.replace(**values) if values else settings


def job_model(name: str) -> DLRMConfig:
    """The planner's models: presets, and production-scale mlperf_v1 with 10x or 30x the rows."""
    check_choice("model", name, _MODEL_NAMES)
    base, _, scale = name.partition("_x")
    return preset(base).with_rows_scale(int(scale)) if scale else preset(name)


def job_optimizers(name: str) -> dict[str, str]:
    """The optimizers the planner prices model ``name`` with: its source's (a preset's
    :data:`~recnotebooks.config.PRESET_TRAINING`, e.g. exact Adagrad on mlperf_dcnv2's tables, whose
    state is a second table the size of the first), else row-wise Adagrad on the tables and Adagrad
    on the dense part (:func:`~recnotebooks.perf.estimate`'s defaults). A production-scale
    ``"<preset>_x<scale>"`` trains as its preset does."""
    base = check_choice("model", name, _MODEL_NAMES).partition("_x")[0]
    how = preset_training(base) if base in preset_names() else {}
    return {
        "sparse_optimizer": str(how.get("sparse_optimizer", "rowwise_adagrad")),
        "dense_optimizer": str(how.get("dense_optimizer", "adagrad")),
    }


def job_setup(name: str) -> dict[str, object]:
    """The settings model ``name`` starts from, as its source trains it: :data:`SOURCE_SETUPS`'
    (mlperf_dcnv2: ``{"software": "hugectr", "strategy": "mlperf", "dtype": "amp_fp16"}``, as MLPerf's
    submissions), else none (:data:`JOB_SETTINGS`' defaults: TorchRec, the cost planner, fp32)."""
    return dict(SOURCE_SETUPS.get(check_choice("model", name, _MODEL_NAMES), {}))


def software_words(values: JobSettings | Mapping[str, object]) -> str:
    """Which software a setting's step is priced as, in words (for a note)."""
    s = as_settings(values)
    if s.software == "hugectr":
        words = (
            "HugeCTR as MLPerf's submissions ran it (one CUDA-graph replay a step, elementwise work fused "
            "into the GEMMs, communication overlapped with compute: the step is the longer of the two, "
            "shorter than the components' sum)"
        )
    else:
        words = "TorchRec in eager PyTorch (a launch per operator, communication after compute)"
    if job_setup(s.model).get("software") == "hugectr" and s.software != "hugectr":
        words += "; MLPerf's submissions ran this model with HugeCTR"
    return words


def check_settings(values: Mapping[str, object]) -> dict[str, object]:
    """Every setting as a dict: :meth:`JobSettings.from_values` (the defaults of
    :data:`JOB_SETTINGS`, the model's :func:`job_setup` over them, and ``values`` over those, each
    checked: ``ValueError`` naming a value a setting does not allow; ``KeyError`` for an unknown
    setting)."""
    return JobSettings.from_values(**values).as_dict()


def _epochs_to_target(model: str, samples: float, batch_size: int) -> float:
    """The epochs MLPerf's reference runs needed at ``batch_size``; ``ValueError`` when
    :data:`TO_TARGET` does not apply (:func:`job_epochs`)."""
    if model not in CONVERGENCE_MODELS:
        raise ValueError(
            f"epochs={TO_TARGET!r} applies to {', '.join(CONVERGENCE_MODELS)} only (MLPerf's reference "
            f"convergence points are DLRM-DCNv2's on Criteo 1TB); give {model} an epoch count"
        )
    if samples != TRAIN_SAMPLES:
        raise ValueError(
            f"epochs={TO_TARGET!r} counts epochs of Criteo 1TB, {TRAIN_SAMPLES:,} samples (MLPerf's "
            f"convergence curve is in its epochs); samples per epoch must be that, got {samples:,}"
        )
    return epochs_to_converge(batch_size)


def job_epochs(values: JobSettings | Mapping[str, object]) -> float:
    """The epochs a setting trains: its ``epochs`` when a number (explicit); for :data:`TO_TARGET`,
    the epochs MLPerf's reference runs needed to reach the target at its ``batch_size``
    (:func:`~recnotebooks.published.convergence.epochs_to_converge`, rules of
    :data:`~recnotebooks.published.convergence.DEFAULT_ROUND`). ``ValueError`` says why :data:`TO_TARGET`
    does not apply: a model without a curve (not one of :data:`CONVERGENCE_MODELS`), samples per
    epoch other than Criteo 1TB's (the curve counts its epochs), or a batch off the curve."""
    s = as_settings(values)
    if isinstance(s.epochs, int):
        return float(s.epochs)
    return _epochs_to_target(s.model, s.samples, s.batch_size)


def epochs_words(values: JobSettings | Mapping[str, object]) -> str:
    """How many epochs a setting trains and where the number comes from, in words (for a note):
    ``"0.781: what MLPerf's reference runs needed ..."`` or ``"3, as set (explicit)"``."""
    s = as_settings(values)
    epochs = job_epochs(s)
    if s.epochs == TO_TARGET:
        return (
            f"{epochs:.3f}, what MLPerf's reference runs needed to reach its AUC target at global batch "
            f"{s.batch_size:,} (PUBLISHED convergence points, {DEFAULT_ROUND} rules, linear "
            "between them)"
        )
    words = f"{epochs:g}, as set (explicit)"
    if s.model in CONVERGENCE_MODELS:
        words += "; \"to MLPerf's AUC target\" takes them from MLPerf's convergence curve"
    return words


@dataclass(frozen=True)
class Outcome:
    """One setting, modeled: the step (None when it cannot be built), the job, and why not."""

    settings: JobSettings
    result: CostResult | None
    job: JobCost | None
    problem: str | None  # the setting cannot be built (e.g. more devices than a node has): the first reason
    #: every rule of building the setting it breaks (``problem`` first); empty when it builds
    problems: tuple[str, ...] = ()
    #: why each table went where it went in the plan ``result`` models (the planner's own
    #: decisions, :func:`explain_outcome` reads them)
    decisions: tuple[Decision, ...] = field(default=(), repr=False, compare=False)

    @property
    def values(self) -> dict[str, object]:
        """The settings as keywords, by name (``evaluate(**o.values)``)."""
        return dict(sorted(self.settings.as_dict().items()))

    @property
    def fits(self) -> bool:
        return self.result is not None and self.result.fits

    @property
    def feasible(self) -> bool:
        """Fits in memory, meets the deadline and stays within the budget."""
        s = self.settings
        return self.fits and self.job is not None and self.job.meets(s.deadline_h, s.budget_usd)

    def why_not(self) -> list[str]:
        """What makes the setting infeasible, in words (empty when it is feasible)."""
        if self.problem or self.result is None or self.job is None:
            return list(self.problems or [self.problem or "the setting could not be modeled"])
        s = self.settings
        why = [] if self.fits else ["does not fit: " + "; ".join(self.result.memory.reasons)]
        if self.job.hours > s.deadline_h:
            why.append(f"misses the deadline: {self.job.hours:,.3g} h > {s.deadline_h} h")
        if self.job.cost_usd > s.budget_usd:
            why.append(f"over budget: USD {self.job.cost_usd:,.0f} > USD {s.budget_usd:,}")
        return why


def _rules_broken(s: JobSettings) -> list[str]:
    """Every rule of building a setting that ``s`` breaks, in words (checked before modeling it, so
    that a setting breaking several says each, not only the first): epochs to a target without a
    curve, more devices than a node has, a table off HBM or bf16 under HugeCTR or MLPerf's plan,
    a precision the hardware has no peak for."""
    broken = []
    try:
        job_epochs(s)
    except ValueError as e:  # epochs to a target this model or batch has no curve for
        broken.append(str(e))
    hw = hardware(s.hardware)
    if s.gpus > hw.devices:
        broken.append(f"a {hw.name} node has {hw.devices} device(s), not {s.gpus}")
    if s.software == "hugectr" or s.strategy == MLPERF_STRATEGY:  # tables in HBM only
        try:
            _check_in_hbm("placement", s.placement, s)
        except ValueError as e:
            broken.append(str(e))
    if s.software == "hugectr" and s.dtype not in HUGECTR_DTYPES:
        broken.append(
            f"dtype must be one of {list(HUGECTR_DTYPES)} with software 'hugectr' (HugeCTR trains in "
            "fp32, with TF32 GEMMs or in fp16 mixed precision; it has no bf16 mode), got "
            f"{s.dtype!r}; choose one of those or software 'torchrec'"
        )
    gemm = precision(s.dtype).gemm
    try:
        hw.flops(gemm)
    except ValueError:
        broken.append(
            f"dtype={s.dtype!r} runs its GEMMs in {gemm}, which {hw.name} has no peak for "
            f"(it has {sorted(hw.peak_flops)}); choose another dtype"
        )
    return broken


def _job_plan(s: JobSettings, work: Workload, hw: Hardware, decisions: list[Decision] | None = None) -> Plan:
    """The plan a setting models: MLPerf's, or the cost planner's with its caches sized by the
    setting (``ValueError`` when HugeCTR's step would find a table off HBM); the planner's
    ``decisions`` appended to the list given."""
    if s.strategy == MLPERF_STRATEGY:
        return mlperf_plan(work.config, s.gpus, s.nodes, hw.hbm_bytes, decisions=decisions)
    plan = plan_tables(
        work.config,
        hw,
        s.gpus * s.nodes,
        strategy=s.strategy,
        placement=s.placement,
        cache_hit_rate=0.9 if s.placement == "cache" else None,  # replaced by the modeled rate below
        batch_size=work.batch_size,
        dtype=work.dtype,
        sparse_optimizer=work.sparse_optimizer,
        decisions=decisions,
    )
    plan = behind_cache(plan, work.config, fraction=s.cache_fraction, policy=s.cache_policy)
    if s.software == "hugectr":  # the cost planner moves what fits in no device's HBM elsewhere
        moved = sorted({x.placement for x in plan.shards} - {"hbm"})
        if moved:
            _check_in_hbm("the plan's tables", moved[0], s)
    return plan


@lru_cache(maxsize=4096)
def _evaluate(s: JobSettings) -> Outcome:
    broken = _rules_broken(s)
    if broken:
        return Outcome(s, None, None, broken[0], tuple(broken))
    epochs = job_epochs(s)
    hw = hardware(s.hardware)
    work = s.workload
    decisions: list[Decision] = []
    try:
        plan = _job_plan(s, work, hw, decisions)
        r = estimate(work.config, hw, batch_size=work.batch_size, gpus=s.gpus, nodes=s.nodes, plan=plan,
                     dtype=work.dtype, implementation=s.software, sparse_optimizer=work.sparse_optimizer,
                     dense_optimizer=work.dense_optimizer)  # fmt: skip
    except ValueError as e:  # a combination the planner or the model cannot build, in its words
        return Outcome(s, None, None, str(e), (str(e),))
    job = job_from_estimate(r, hw, s.samples, epochs, overlap=s.software == "hugectr")
    return Outcome(s, r, job, None, decisions=tuple(decisions))


def explain_outcome(outcome: Outcome) -> PlanExplanation:
    """The plan of a modeled setting explained rank by rank (:func:`recnotebooks.perf.explain.explain_plan`,
    **modeled**): each rank's step by component, the storage it reserves against its device's
    memory, the imbalance (max/mean), the critical path, and each table's why from the planner's
    own decisions, for the step :func:`evaluate` priced (the same plan, software and devices).
    ``ValueError`` for a setting that could not be built (``outcome.problem``)."""
    check_type("outcome", outcome, Outcome, "an Outcome of evaluate() or plan_job()")
    if outcome.result is None:
        raise ValueError(
            f"outcome: this setting was not modeled, so there is no plan to explain: {outcome.problem}"
        )
    s, r = outcome.settings, outcome.result
    assert r.plan is not None  # every step the planner prices is of a plan
    return explain_plan(s.workload, hardware(s.hardware), r.plan, gpus=s.gpus, nodes=s.nodes,
                        decisions=list(outcome.decisions), implementation=s.software)  # fmt: skip


def _check_in_hbm(what: str, placement: str, s: JobSettings) -> None:
    """``ValueError`` naming ``what`` when ``placement`` is not HBM under a setting that keeps every
    table there: software HugeCTR (priced as MLPerf's runs, tables in HBM) or MLPerf's plan."""
    hugectr = s.software == "hugectr"
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


def evaluate(settings: JobSettings | None = None, /, **values: object) -> Outcome:
    """The modeled outcome of one setting: ``evaluate(nodes=2)`` (:meth:`JobSettings.from_values`),
    or ``evaluate(settings)`` with a :class:`JobSettings` (``values`` then change it). Settings
    checked; results reused for a repeated setting."""
    return _evaluate(job_settings(settings, **values))


def _neighbours(s: JobSettings, lever: str, notch: bool = True) -> list[object]:
    opts = setting_values(lever)
    now = getattr(s, lever)
    i = opts.index(now)
    if notch and lever in _ORDERED:
        return [opts[j] for j in (i - 1, i + 1) if 0 <= j < len(opts)]
    return [o for o in opts if o != now]


class LeverRow(TypedDict):
    """A lever of :data:`LEVERS` moved one notch (:func:`best_lever`): ``change`` says it
    (``"nodes 1→2"``), ``speedup`` is hours now / hours then, ``cost_ratio`` cost then / cost now,
    ``feasible`` whether the setting then is."""

    lever: str
    change: str
    speedup: float
    cost_ratio: float
    feasible: bool


def _best_move(now: Outcome, lever: str) -> Outcome | None:
    """The fastest setting that fits with ``lever`` one notch away from ``now`` (None when none fits)."""
    best, hours = None, 0.0
    for x in _neighbours(now.settings, lever):
        o = evaluate(now.settings, **{lever: x})
        if o.fits and o.job is not None and (best is None or o.job.hours < hours):
            best, hours = o, o.job.hours
    return best


def best_lever(
    settings: JobSettings | None = None, /, **values: object
) -> tuple[LeverRow | None, list[LeverRow]]:
    """Each lever of :data:`LEVERS` moved one notch (the next value up or down; every other choice
    of a named option): the best by time to train among those that fit (None when it does not
    speed the job up by :data:`MIN_GAIN`: :func:`lever_helps`), and one row per lever
    (:class:`LeverRow`: ``lever``, ``change``, ``speedup`` = hours now / hours then, ``cost_ratio``,
    ``feasible``). Settings as :func:`evaluate` takes them."""
    now = evaluate(settings, **values)
    if now.job is None:
        return None, []
    rows: list[LeverRow] = []
    for lever in LEVERS:
        best = _best_move(now, lever)
        if best is None or best.job is None or best.job == now.job:  # same: nothing to act on (no cache)
            continue
        rows.append(
            LeverRow(
                lever=lever,
                change=f"{lever} {getattr(now.settings, lever)}→{getattr(best.settings, lever)}",
                speedup=now.job.hours / best.job.hours,
                cost_ratio=best.job.cost_usd / max(now.job.cost_usd, 1e-12),
                feasible=best.feasible,
            )
        )
    rows.sort(key=lambda r: -r["speedup"])
    return (rows[0] if rows and lever_helps(rows[0]) else None), rows


#: A lever helps when it makes the job at least this much faster (a gain that prints as "1.00x" is none).
MIN_GAIN = 1.005


def lever_helps(row: LeverRow) -> bool:
    """Whether a :func:`best_lever` row speeds the job up by at least :data:`MIN_GAIN`."""
    return float(row["speedup"]) >= MIN_GAIN


#: Levers whose value only matters to a device cache: moved only where the plan has one.
_CACHE_LEVERS = ("cache_fraction", "cache_policy")


def _changed(s0: JobSettings, changes: dict[str, object]) -> Outcome | None:
    """The setting ``s0`` with ``changes``, modeled; None when a cache lever moves without a cache
    (the same plan as without the change: nothing to try)."""
    s = s0.replace(**changes)
    if any(k in _CACHE_LEVERS for k in changes) and s.placement != "cache":
        return None
    return evaluate(s)


def _near_changes(s0: JobSettings) -> list[list[dict[str, object]]]:
    """The changes to ``s0`` :func:`nearest_feasible` tries, in tiers, nearest first: one change on
    the same hardware (any value of a lever, or of a job setting :func:`_job_fixes` names), two
    changes on the same hardware, one change of hardware, two changes one of which is the hardware
    (other hardware is the largest move: another machine, not another setting of this one)."""
    keys = [k for k in (*LEVERS, *_job_fixes(s0)) if k != "hardware"]
    alts = {k: _neighbours(s0, k, notch=False) for k in (*keys, "hardware")}
    return [
        [{k: x} for k in keys for x in alts[k]],
        [{a: x, b: y} for i, a in enumerate(keys) for b in keys[i + 1 :] for x in alts[a] for y in alts[b]],
        [{"hardware": h} for h in alts["hardware"]],
        [{"hardware": h, k: x} for h in alts["hardware"] for k in keys for x in alts[k]],
    ]


def _modeled(outcomes: list[Outcome], feasible: bool) -> list[tuple[Outcome, JobCost]]:
    """The outcomes whose job was modeled and that are feasible (else: that fit), with their job."""
    return [(o, o.job) for o in outcomes if o.job is not None and (o.feasible if feasible else o.fits)]


def nearest_feasible(settings: JobSettings | None = None, /, **values: object) -> tuple[Outcome | None, str]:
    """The nearest feasible setting, and a sentence saying which.

    Nearest is the same hardware before another, then fewest changes: one change on the same
    hardware (any value of a lever: more nodes, another placement, precision...), else two changes
    on the same hardware, else one change of hardware, else two changes one of which is the
    hardware; among the feasible settings of the first tier that has one, the cheapest. When no
    setting within two changes is feasible: ``(fastest setting found that fits, why)``, or
    ``(None, why)`` when none fits. Settings as :func:`evaluate` takes them."""
    now = evaluate(settings, **values)
    s0 = now.settings
    tried: list[Outcome] = []
    for tier in _near_changes(s0):  # a later tier is modeled only when no earlier one has a feasible setting
        outcomes = [o for o in (_changed(s0, c) for c in tier) if o is not None]
        tried += outcomes
        ok = _modeled(outcomes, feasible=True)
        if ok:
            best = min(ok, key=lambda p: p[1].cost_usd)[0]
            return best, "nearest feasible: " + describe_change(s0, best.settings)
    fitting = _modeled([now, *tried], feasible=False)
    if not fitting:
        return None, "nothing within two changes fits in memory"
    fast, j = min(fitting, key=lambda p: p[1].hours)
    return fast, (
        f"no setting within two changes meets the deadline and the budget; the fastest that fits "
        f"({describe_change(s0, fast.settings)}) takes {j.hours:,.3g} h and costs "
        f"USD {j.cost_usd:,.0f}"
    )


def _job_fixes(s: JobSettings) -> tuple[str, ...]:
    """Settings of the job itself (not levers) that :func:`nearest_feasible` may change too: the one
    that makes :data:`TO_TARGET` impossible whatever the levers (a model without a curve, samples
    per epoch other than Criteo 1TB's). A batch off the curve is a lever's to fix."""
    if s.epochs != TO_TARGET:
        return ()
    if s.model not in CONVERGENCE_MODELS:
        return ("epochs",)
    return ("samples",) if s.samples != TRAIN_SAMPLES else ()


def describe_change(old: JobSettings | Mapping[str, object], new: JobSettings | Mapping[str, object]) -> str:
    """``"dtype fp32→amp_bf16, nodes 1→2"``: the settings ``new`` changes, by name, or ``"no change"``."""
    a, b = as_settings(old).as_dict(), as_settings(new).as_dict()
    return ", ".join(f"{k} {a[k]}→{b[k]}" for k in sorted(b) if b[k] != a[k]) or "no change"


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
    lever: LeverRow | None
    lever_rows: list[LeverRow]


def _fallback(s: JobSettings) -> JobSettings:
    """The setting shown when nothing within two changes of ``s`` fits: the same job (samples,
    epochs, deadline, budget) of the tiny model with every other setting at its default (one DGX
    H100 node, TorchRec, the cost planner, tables in HBM, fp32), which always builds."""
    epochs = 1 if s.epochs == TO_TARGET else s.epochs  # tiny has no convergence curve
    return JobSettings.from_values(
        model="tiny", samples=s.samples, epochs=epochs, deadline_h=s.deadline_h, budget_usd=s.budget_usd
    )


def plan_job(settings: JobSettings | None = None, /, **values: object) -> JobPlan:
    """The verdict on one setting (``plan.now.feasible``, ``plan.now.why_not()``), the nearest
    feasible setting when it is not, the setting to show, and the levers (:class:`JobPlan`).
    Settings as :func:`evaluate` takes them."""
    now = evaluate(settings, **values)
    near, sentence, fallback = None, "", False
    if not now.feasible:
        near, sentence = nearest_feasible(now.settings)
    shown = now
    if now.job is None:  # nothing to show for this setting itself: show the nearest one instead
        if near is None or near.job is None:  # nothing fits within two changes: a setting that always builds
            near = evaluate(_fallback(now.settings))
            fallback = True
            if near.job is None:  # the tiny model on one DGX H100 node with the defaults always builds
                raise ValueError(f"the planner could not model its fallback setting: {near.problem}")
        shown = near
    lever, rows = best_lever(shown.settings)
    return JobPlan(now, shown, near, sentence, fallback, lever, rows)


#: The components of a modeled step that do not grow with the global batch: the per-step overhead
#: (launching operators; none in HugeCTR's CUDA-graphed step), and the all-reduce and update of the
#: dense weights.
FIXED_COMPONENTS = ("overhead", "all_reduce", "dense_optimizer")
#: The layouts :func:`convergence_jobs` compares, ``(nodes, devices per node)``: one 8-GPU node, as
#: NVIDIA's single-node DLRM-DCNv2 submissions, and 8 of them (64 GPUs), as its multi-node ones.
CONVERGENCE_LAYOUTS = ((1, 8), (8, 8))


class ConvergenceRow(TypedDict):
    """One layout and global batch of :func:`convergence_jobs`."""

    layout: str
    nodes: int
    devices: int
    global_batch: int
    step_ms: float
    samples_per_s: float
    epochs: float
    samples: float
    minutes: float
    eval_minutes: float
    fixed_ms: float
    fixed_share: float
    bound_by: str
    fits: bool
    source: str


def _convergence_row(r: CostResult, nodes: int, gpus: int, batch: int, epochs: float) -> ConvergenceRow:
    """One row of :func:`convergence_jobs`: the modeled step ``r`` trained ``epochs`` at ``batch``."""
    train_s, eval_s = mlperf_seconds(r, epochs, batch)
    slowest = max(r.per_rank, key=lambda c: sum(c.values()))
    fixed = sum(slowest[k] for k in FIXED_COMPONENTS)
    return ConvergenceRow(
        layout=f"{nodes * gpus} GPUs ({nodes} node{'s' if nodes > 1 else ''})",
        nodes=nodes,
        devices=nodes * gpus,
        global_batch=batch,
        step_ms=r.step_time_overlap * 1e3,
        samples_per_s=r.throughput_overlap,
        epochs=epochs,
        samples=epochs * TRAIN_SAMPLES,
        minutes=(train_s + eval_s) / 60,
        eval_minutes=eval_s / 60,
        fixed_ms=fixed * 1e3,
        fixed_share=fixed / r.step_time,
        bound_by=max(slowest, key=lambda k: slowest[k]),
        fits=r.fits,
        source="modeled",
    )


def convergence_jobs(
    *,
    model: str = "mlperf_dcnv2",
    hardware: str = "dgx_h100",
    layouts: tuple[tuple[int, int], ...] = CONVERGENCE_LAYOUTS,
    batches: tuple[int, ...] | None = None,
) -> list[ConvergenceRow]:
    """``model`` trained to MLPerf's target as MLPerf's submissions train it, at each global batch of
    ``batches`` (default: the batches of MLPerf's reference convergence points,
    :func:`~recnotebooks.published.convergence.rules_for_round`, 32,768 to 160,000) on each layout
    ``(nodes, devices per node)`` of ``layouts`` of ``hardware``.

    The step is the one notebook 02 holds against MLPerf's published runs
    (:data:`~recnotebooks.perf.mlperf_setup.MLPERF_SETUP`: NVIDIA's HugeCTR, mixed precision, exact
    Adagrad; :func:`~recnotebooks.perf.mlperf_plan.mlperf_plan`), **modeled**; the epochs are the
    curve's (:func:`job_epochs`, **published**); the run's minutes count its evaluations as MLPerf's
    do (:func:`~recnotebooks.perf.mlperf_setup.mlperf_seconds`). One row per layout and batch
    (:class:`ConvergenceRow`): ``layout``, ``nodes``, ``devices``, ``global_batch``, ``step_ms``
    (communication overlapped, as HugeCTR runs it) and ``samples_per_s`` (training), ``epochs``,
    ``samples``, ``minutes`` (training and evaluations) and ``eval_minutes``, ``fixed_ms`` (the
    slowest rank's :data:`FIXED_COMPONENTS`, which a bigger batch shares among more samples) and
    ``fixed_share`` (of its step, not overlapped), ``bound_by``, ``fits``. A batch off the curve, a
    model without one, a layout a ``hardware`` node cannot hold or an unknown ``hardware`` raises
    ``ValueError`` naming it."""
    if batches is None:
        batches = tuple(sorted({p.batch_size for p in rules_for_round(DEFAULT_ROUND)}))
    if not batches or not layouts:
        raise ValueError(
            f"batches and layouts must be non-empty, got batches={batches!r}, layouts={layouts!r}"
        )
    batches = tuple(check_int(f"batches[{i}]", b, lo=1, hi=2**40) for i, b in enumerate(batches))
    hw = _hardware(check_choice("hardware", hardware, list(HARDWARE)))
    config = job_model(check_choice("model", model, _MODEL_NAMES))
    epochs = {b: _epochs_to_target(model, TRAIN_SAMPLES, b) for b in batches}
    rows = []
    for i, (nodes, gpus) in enumerate(layouts):
        nodes = check_int(f"layouts[{i}] nodes", nodes, lo=1, hi=1024)
        gpus = check_int(f"layouts[{i}] devices per node", gpus, lo=1, hi=hw.devices)
        plan = mlperf_plan(config, gpus, nodes, hw.hbm_bytes)
        for batch in batches:
            r = estimate(config, hw, batch_size=batch, gpus=gpus, nodes=nodes, plan=plan, **MLPERF_SETUP)
            rows.append(_convergence_row(r, nodes, gpus, batch, epochs[batch]))
    return rows
