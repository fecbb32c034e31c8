"""The two forms the cost model takes a workload in: a :class:`~recnotebooks.config.Workload`, or
(the older form) a :class:`~recnotebooks.config.DLRMConfig` followed by the step's settings as
keywords.

:func:`~recnotebooks.perf.estimate`, :func:`~recnotebooks.perf.memory_report`,
:func:`~recnotebooks.perf.memory_footprint`, :func:`~recnotebooks.perf.plan_tables` and
:func:`~recnotebooks.perf.best_placement` take either::

    estimate(Workload(config, batch_size=8192, dtype="bf16"), "dgx_a100", gpus=8)
    estimate(config, "dgx_a100", batch_size=8192, dtype="bf16", gpus=8)  # the older form

and model the same step. :func:`workload_from` turns what they were given into the one
:class:`~recnotebooks.config.Workload` they model; giving a Workload *and* the older keywords is a
``TypeError`` naming them (:meth:`Workload.replace <recnotebooks.config.Workload.replace>` changes
a Workload).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recnotebooks.config import DLRMConfig, Workload

__all__ = ["OLDER_KEYWORDS", "OlderDefault", "workload_from"]

#: The keywords of the older form: a :class:`~recnotebooks.config.Workload`'s fields after ``config``.
OLDER_KEYWORDS = ("batch_size", "dtype", "zipf_exponent", "sparse_optimizer", "dense_optimizer")


class OlderDefault:
    """The default of an older-form parameter that a signature spells out (``memory_footprint``'s
    positional optimizers): it shows as its value (``'rowwise_adagrad'``) and counts as not given,
    so a :class:`~recnotebooks.config.Workload` may stand in its place."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def workload_from(
    first: object,
    older: Mapping[str, object],
    caller: str,
    defaults: Mapping[str, object] | None = None,
    batch_size: object = None,
) -> Workload:
    """The :class:`~recnotebooks.config.Workload` ``caller`` models: ``first`` when it is one (then
    ``older`` must be empty), else one built from ``first`` (a DLRMConfig) and the older form's
    keywords ``older`` (any of :data:`OLDER_KEYWORDS`; an :class:`OlderDefault` counts as not
    given, ``defaults`` fill in what is not given), with ``batch_size`` where the older form gives
    the batch positionally (``None``: not given). ``TypeError`` names an unknown keyword, a
    Workload mixed with keywords, and a first argument that is neither; ``ValueError``/``TypeError``
    from the Workload name a bad value."""
    given = {k: v for k, v in older.items() if not isinstance(v, OlderDefault)}
    if batch_size is not None:
        given["batch_size"] = batch_size
    unknown = sorted(set(given) - set(OLDER_KEYWORDS))
    if unknown:
        raise TypeError(f"{caller}() got unexpected keyword argument(s) {unknown}; the step's settings are "
                        f"{list(OLDER_KEYWORDS)}")  # fmt: skip
    if isinstance(first, Workload):
        if given:
            raise TypeError(
                f"{caller}() takes a Workload, or a DLRMConfig with the keywords {list(OLDER_KEYWORDS)}, "
                f"not both: got a Workload and {sorted(given)}; change the Workload (workload.replace(...))"
            )
        return first
    if not isinstance(first, DLRMConfig):
        raise TypeError(f"config must be a DLRMConfig (or a Workload), got {type(first).__name__}")
    settings: dict[str, Any] = {**(defaults or {}), **given}
    if "batch_size" not in settings:
        raise TypeError(f"{caller}() with a DLRMConfig needs batch_size= (or give it a Workload)")
    return Workload(first, **settings)
