"""A deterministic held-out split of a stream of batches: :class:`HeldOutSplit`.

Real click logs come as files, not as a train and an eval stream. ``HeldOutSplit`` splits
any re-iterable stream of batches (a :class:`~recnotebooks.data.criteo.CriteoReader`) by
batch index: of the first ``n`` batches, ``ceil(n * eval_fraction)`` are held out, spread
evenly (batch 0 is always held out, so even a small file has an eval set). The same files
and batch size always give the same split, and the two splits never share a batch.

The ``"train"`` split can repeat the files for several epochs (``epochs=None``: forever,
so a trainer asks for as many steps as it likes) and records its position, so a checkpoint
resumes exactly where it stopped; the ``"eval"`` split is one pass, the same every time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

from recnotebooks.checks import check_choice, check_fraction, check_int, show
from recnotebooks.data.batch import Batch

__all__ = ["HeldOutSplit", "is_held_out"]


def _as_fraction(eval_fraction: float) -> Fraction:
    return Fraction(eval_fraction).limit_denominator(1_000_000)


def is_held_out(index: int, eval_fraction: float) -> bool:
    """Whether batch ``index`` (0-based) belongs to the eval split.

    Exactly ``ceil(n * eval_fraction)`` of the first ``n`` batches are held out, for every
    ``n`` (exact rational arithmetic, no floating-point drift over millions of batches).
    """
    f = _as_fraction(eval_fraction)
    held = lambda n: -((-n * f.numerator) // f.denominator)  # noqa: E731 - ceil(n * f)
    return held(index + 1) > held(index)


class HeldOutSplit:
    """The ``"train"`` or ``"eval"`` batches of ``source`` (see the module docstring).

    Args:
        source: a re-iterable of :class:`Batch` (each ``iter()`` starts from the beginning).
        eval_fraction: share of batches held out, in (0, 1).
        split: ``"train"`` or ``"eval"``.
        epochs: passes over ``source`` for the train split (None: repeat forever); the eval
            split always makes one pass.
    """

    def __init__(
        self, source: Iterable[Batch], eval_fraction: float, split: str = "train", epochs: int | None = None
    ) -> None:
        if not hasattr(source, "__iter__"):
            raise TypeError(f"source must be an iterable of Batch, got {show(source)}")
        self.source = source
        self.eval_fraction = check_fraction("eval_fraction", eval_fraction, lo_open=True, hi_open=True)
        self.split = check_choice("split", split, ("train", "eval"))
        self.epochs = None if epochs is None else check_int("epochs", epochs, lo=1)
        self.position = 0  # train batches yielded so far (over all epochs)

    def _own(self) -> Iterator[Batch]:
        """One pass over this split's batches of ``source``."""
        want_eval = self.split == "eval"
        for i, batch in enumerate(self.source):
            if not isinstance(batch, Batch):
                raise TypeError(f"source must yield Batch objects, got {type(batch).__name__}")
            if is_held_out(i, self.eval_fraction) == want_eval:
                yield batch

    def __iter__(self) -> Iterator[Batch]:
        if self.split == "eval":
            yield from self._own()
            return
        skip, epoch = self.position, 0
        while self.epochs is None or epoch < self.epochs:
            seen = 0
            for batch in self._own():
                seen += 1
                if skip:
                    skip -= 1
                    continue
                self.position += 1
                yield batch
            if seen == 0:
                raise ValueError(
                    "the train split is empty: the source yielded no batches outside the held-out "
                    f"{self.eval_fraction:.0%}; give more data, a smaller batch size or a smaller "
                    "eval_fraction"
                )
            epoch += 1

    def _identity(self) -> dict[str, Any]:
        """What must match to resume: the fraction, and the source's files and batch size if it has them."""
        paths = getattr(self.source, "paths", None)
        return {
            "eval_fraction": self.eval_fraction,
            "files": None if paths is None else [str(p) for p in paths],
            "batch_size": getattr(self.source, "batch_size", None),
        }

    def state_dict(self) -> dict[str, Any]:
        """Resumable state: train batches yielded so far and the split's identity."""
        return {"kind": "held_out_split", "position": self.position, **self._identity()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the position in ``state`` at the next ``iter()`` (same files and fraction)."""
        if not isinstance(state, dict) or state.get("kind") != "held_out_split":
            raise ValueError(f"state must come from HeldOutSplit.state_dict(), got {show(state)}")
        for key, mine in self._identity().items():
            if state.get(key, mine) != mine:
                raise ValueError(
                    f"state has {key}={show(state.get(key))} but this split has {key}={show(mine)}: "
                    "the batches would differ"
                )
        self.position = check_int("state['position']", state.get("position"), lo=0)
