"""Prefetch as a pipeline stage: :class:`PrefetchingIterator`.

While step ``t`` trains, a background thread takes the next batches from the data and calls
``collection.prefetch(batch.sparse)`` on them: their missing rows are copied into the cache
(on CUDA on a side stream, which the forward waits for) without evicting any row step ``t``
still reads or updates, so their forwards find them resident — FBGEMM's prefetch pipeline
(``prefetch()`` for batch ``t+1`` beside the forward of ``t``), here with a thread.

The iterator keeps ``depth`` batches prefetched ahead. It is re-iterable when ``data`` is,
and checkpoints exactly: its ``state_dict`` is the data position after the last batch it
*yielded* (not the batches its thread has drawn ahead), so ``Trainer`` resumes where the
model stopped.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from recnotebooks.checks import check_int, show

__all__ = ["PrefetchingIterator"]

_DONE = object()


class PrefetchingIterator:
    """Iterate ``data`` (batches with ``.sparse``, or ``JaggedBatch``es) while a background
    thread prefetches the next ``depth`` of them into ``collection``'s cache.

    Args:
        data: an iterable of ``Batch`` or ``JaggedBatch`` (re-iterable for several passes).
        collection: a cached embedding collection (it has ``prefetch``).
        depth: batches prefetched ahead (0: no thread, batches pass through).
        to_device: move each batch to the collection's device before prefetching it (so
            the batch the model sees is the one prefetched).
    """

    def __init__(self, data: Iterable[Any], collection: Any, depth: int = 1, to_device: bool = True) -> None:
        if not hasattr(data, "__iter__"):
            raise TypeError(f"data must be an iterable of batches, got {show(data)}")
        if not callable(getattr(collection, "prefetch", None)):
            raise TypeError(
                f"collection must be a cached embedding collection (with prefetch), got {show(collection)}"
            )
        self.data = data
        self.collection = collection
        self.depth = check_int("depth", depth, lo=0)
        self.to_device = to_device
        self._queue: queue.Queue | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._state: Any = None  # data position after the last batch yielded

    # ----- iteration --------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        self.close()
        it = iter(self.data)
        self._state = self._data_state()
        if self.depth == 0:
            return self._passthrough(it)
        self._stop = threading.Event()
        self._queue = queue.Queue(maxsize=self.depth)
        self._thread = threading.Thread(target=self._produce, args=(it, self._queue, self._stop), daemon=True)
        self._thread.start()
        return self._consume(self._queue)

    def _move(self, batch: Any) -> Any:
        if self.to_device and hasattr(batch, "to"):
            return batch.to(self.collection.weight.device)
        return batch

    def _passthrough(self, it: Iterator[Any]) -> Iterator[Any]:
        for batch in it:
            self._state = self._data_state()
            yield self._move(batch)

    def _produce(self, it: Iterator[Any], q: queue.Queue, stop: threading.Event) -> None:
        try:
            for batch in it:
                if stop.is_set():
                    return
                state = self._data_state()
                batch = self._move(batch)
                self.collection.prefetch(getattr(batch, "sparse", batch))
                while not stop.is_set():
                    try:
                        q.put((batch, state), timeout=0.05)
                        break
                    except queue.Full:
                        continue
            item: Any = _DONE
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            item = e
        while not stop.is_set():
            try:
                q.put((item, None), timeout=0.05)
                return
            except queue.Full:
                continue

    def _consume(self, q: queue.Queue) -> Iterator[Any]:
        while True:
            batch, state = q.get()
            if batch is _DONE:
                return
            if isinstance(batch, BaseException):
                self.close()
                raise batch
            self._state = state
            yield batch

    def close(self) -> None:
        """Stop the background thread and forget the batches it prefetched."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self._queue = None
        cancel = getattr(self.collection, "cancel_prefetch", None)
        if callable(cancel):
            cancel()

    def __del__(self) -> None:  # pragma: no cover - best effort at garbage collection
        try:
            if self._thread is not None:
                self._stop.set()
        except Exception:  # noqa: BLE001
            pass

    # ----- checkpoints ---------------------------------------------------------------------
    def _data_state(self) -> Any:
        sd = getattr(self.data, "state_dict", None)
        return sd() if callable(sd) else None

    def state_dict(self) -> dict[str, Any] | None:
        """The data position after the last batch yielded (``data.state_dict()`` then), or
        None when ``data`` has no ``state_dict``."""
        return self._state if self._state is not None else self._data_state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Stop prefetching and restore ``data``'s position; the next pass continues there."""
        self.close()
        self.data.load_state_dict(state)
        self._state = None

    def __getattr__(self, name: str) -> Any:  # e.g. batch_size of the wrapped data
        if name.startswith("_") or name in ("data", "collection"):
            raise AttributeError(name)
        return getattr(self.data, name)
