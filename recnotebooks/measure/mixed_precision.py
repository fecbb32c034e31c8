"""Mixed precision, measured here: :func:`compare_precision` trains one model per dtype (fp32, and
bf16 autocast with fp32 master weights) from the same seed and data and evaluates each on the
same held-out batches, so a notebook shows speed and accuracy side by side. What precision does
to a GPU's step is modeled in :mod:`recnotebooks.perf.precision`."""

from __future__ import annotations

import torch

from recnotebooks.checks import check_choice, check_int, check_steps, check_type
from recnotebooks.config import DLRMConfig
from recnotebooks.data.synthetic import SyntheticCriteo
from recnotebooks.nn.dlrm import DLRM
from recnotebooks.train import TRAIN_DTYPES, TrainConfig, Trainer, resolve_device

__all__ = ["compare_precision"]


def compare_precision(
    config: DLRMConfig,
    steps: int = 200,
    *,
    batch_size: int = 256,
    dtypes: tuple[str, ...] = ("fp32", "bf16"),
    seed: int = 0,
    eval_batches: int = 10,
    device: str | torch.device = "cpu",
) -> list[dict[str, object]]:
    """Train ``config`` from the same seed on the same synthetic data once per dtype of ``dtypes``
    (``TrainConfig.dtype``: ``"bf16"`` is autocast around forward with fp32 master weights) and
    evaluate each on the same held-out batches: one tidy row per dtype, ``source="measured"``,
    with ``samples_per_s`` (steady state), ``seconds_per_step``, ``auc``, ``logloss``, ``steps``,
    ``batch_size``, ``device`` and whether the speed can be trusted (``reliable``, and
    ``reliability``: why not, :func:`recnotebooks.timing.reliability`'s words) — speed and accuracy
    side by side for a notebook."""
    check_type("config", config, DLRMConfig, "a DLRMConfig")
    steps = check_steps("steps", steps, lo=2)
    batch_size = check_int("batch_size", batch_size, lo=1)
    eval_batches = check_steps("eval_batches", eval_batches, lo=1)
    check_type("dtypes", dtypes, (tuple, list), "a tuple of dtype names")
    if not dtypes:
        raise ValueError(f"dtypes must name at least one of {list(TRAIN_DTYPES)}, got {dtypes!r}")
    for i, dt in enumerate(dtypes):
        check_choice(f"dtypes[{i}]", dt, TRAIN_DTYPES)
    dev = resolve_device(device)
    rows: list[dict[str, object]] = []
    for dt in dtypes:
        tc = TrainConfig(
            steps=steps,
            warmup_steps=min(5, steps - 1),
            eval_batches=eval_batches,
            time_phases=False,
            progress=False,
            dtype=dt,
        )
        train = SyntheticCriteo(config, batch_size, seed=seed, split="train")
        evals = SyntheticCriteo(config, batch_size, seed=seed, split="eval")
        torch.manual_seed(seed)
        r = Trainer(DLRM(config, device=dev, seed=seed), train, evals, tc, device=dev).fit()
        rows.append(
            {
                "dtype": dt,
                "source": "measured",
                "samples_per_s": r.samples_per_s,
                "seconds_per_step": r.seconds_per_step,
                "auc": r.auc,
                "logloss": r.logloss,
                "steps": r.steps,
                "batch_size": r.batch_size,
                "device": r.device,
                "reliable": r.reliable,
                "reliability": r.reliability,
            }
        )
    return rows


__all__ += ["compare_precision"]
