"""Where tasks run: serially, on a local process pool, or on a Dask cluster.

:func:`map_tasks` applies a function to a list of items and returns one
:class:`TaskOutcome` per item, **in item order**, whichever executor ran them:

``local``
    In this process, one item after the other (the default).
``auto``
    Like ``local`` at first; once the items done have taken
    :data:`AUTO_PROBE_S` seconds and the rest is estimated (from those
    seconds and the items' ``weights``) to take at least
    :data:`AUTO_POOL_S` more, the rest goes to a ``processes`` pool, if this
    machine has more than one CPU. Small batches never pay for a pool.
``processes``
    A local pool of worker processes (``concurrent.futures`` with the
    ``spawn`` start method, so it behaves the same on every platform).
``dask``
    A ``dask.distributed`` cluster: the scheduler at ``scheduler``
    (``tcp://HOST:PORT``), or, without an address, a ``LocalCluster`` of
    ``workers`` single-threaded worker processes on 127.0.0.1, started for
    the call and closed after it.

Rules every executor follows, so results do not depend on where tasks ran:

* ``fn`` and the items travel by pickle: ``fn`` must be a module-level
  function (pickled by reference, so workers must be able to import its
  module) and items plain data or objects that pickle themselves.
* An item whose call raises is run once more (``retries=1``); if it fails
  again its outcome carries the error text (``"ValueError: ..."``) and the
  number of attempts, and every other item's result is kept.
* ``progress`` hears about every item as it finishes (completion order);
  the returned list is in item order.

Ctrl-C stops every executor the same way: the worker processes a pool or a
local Dask cluster starts never see the terminal's interrupt themselves
(:func:`children_ignore_interrupts`), so none of them prints a traceback;
the caller gets the ``KeyboardInterrupt``, and closing the executor stops
the workers at once instead of letting their tasks finish.

Items are sent in chunks (about eight per worker, at most 64 items each)
to keep per-task overhead low. When the caller knows items' relative costs
(``weights``), chunks hold about equal cost instead of equal counts and the
costliest go first, so one slow chunk does not finish alone at the end. Items that failed in a chunk are retried
together; when a whole chunk is lost (a worker died, an item would not
pickle) each of its items is retried on its own.

Examples
--------
>>> import math
>>> out = map_tasks(math.sqrt, [4.0, -1.0, 9.0])
>>> [o.value for o in out]
[2.0, None, 3.0]
>>> out[1].error, out[1].attempts
('ValueError: math domain error', 2)
"""
from __future__ import annotations

import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from collsim.errors import InputError, is_interrupt
from collsim.version import __version__

__all__ = [
    "EXECUTORS",
    "TaskOutcome",
    "Executor",
    "open_executor",
    "check_executor_options",
    "map_tasks",
    "executor_label",
    "progress_bar",
    "usable_cpus",
    "children_ignore_interrupts",
]

#: The executor kinds :func:`open_executor` and ``collsim run --executor`` accept.
EXECUTORS: tuple[str, ...] = ("auto", "local", "processes", "dask")

#: ``auto``: seconds of items run in this process before the rest's time is estimated, and the estimate
#: from which a process pool pays for itself (starting one and importing collsim in each worker costs
#: about a second).
AUTO_PROBE_S = 1.0
AUTO_POOL_S = 4.0

#: Seconds to wait for a Dask scheduler to answer, and for its first worker.
CONNECT_TIMEOUT_S = 10.0
WORKER_WAIT_S = 60.0
#: Largest chunk of items sent to a worker as one task.
MAX_CHUNK = 64
#: Times a process pool whose worker died is replaced before its remaining items are failed.
MAX_POOL_RESTARTS = 3


@dataclass
class TaskOutcome:
    """What became of one item.

    Attributes
    ----------
    index : int
        Position of the item in the input.
    item : Any
        The item itself.
    value : Any
        ``fn(item)`` when it succeeded, else ``None``.
    error : str or None
        ``"ExceptionType: message"`` of the last failed attempt, ``None`` on success.
    attempts : int
        Calls made (1, or 2 after a retry).
    detail : str or None
        The traceback of the last failure, as text (for debugging; not part of any result file).
    """

    index: int
    item: Any
    value: Any = None
    error: str | None = None
    attempts: int = 0
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# ---------------------------------------------------------------------------
# what runs on a worker


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _call(fn: Callable[[Any], Any], item: Any) -> tuple[bool, Any, str | None]:
    """``(True, value, None)`` or ``(False, error text, traceback)``; raises nothing but an interrupt."""
    try:
        return True, fn(item), None
    except Exception as exc:  # noqa: BLE001 - every failure is reported with its item
        if is_interrupt(exc):  # Ctrl-C wrapped by a library (ctypes, for z3): not this item's failure
            raise
        return False, _describe(exc), traceback.format_exc()


@contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Processes started inside (and by threads started inside) never receive the terminal's Ctrl-C.

    SIGINT is blocked in the calling thread meanwhile: a blocked signal stays blocked across ``fork`` and
    ``exec`` and in threads created meanwhile (a Dask cluster's event loop, which starts its worker
    processes), and Python leaves a signal mask as it finds it. So a Ctrl-C reaches this process alone
    (pending until the block ends, if no other thread takes it), which stops its workers itself: none of
    them dies printing a ``KeyboardInterrupt`` traceback halfway through importing collsim. A no-op where
    signal masks do not exist or off the main thread.
    """
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker with SIGINT blocked and then *unblocks* it in the calling
    # thread, which would end the block early: start it first.
    from multiprocessing import resource_tracker  # lazy: only where signal masks exist (POSIX)

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _run_chunk(fn: Callable[[Any], Any], chunk: Sequence[tuple[int, Any]]) -> list[tuple[int, bool, Any, str | None]]:
    """Run ``fn`` on each ``(index, item)``; the worker-side task of the pool and Dask executors."""
    return [(index, *_call(fn, item)) for index, item in chunk]


# ---------------------------------------------------------------------------
# executors


def _auto_chunk(n_items: int, n_workers: int) -> int:
    return max(1, min(MAX_CHUNK, n_items // max(1, 8 * n_workers)))


def _weighted_chunks(weights: Sequence[float], n_workers: int, size: int) -> list[list[int]]:
    """Indices in chunks of consecutive items, each of at most ``size`` items and about ``1/(8 n_workers)``
    of the total weight (an item heavier than that is a chunk of its own), heaviest chunk first.

    >>> _weighted_chunks([1, 1, 1, 1, 1, 1, 1, 1, 8], n_workers=1, size=64)
    [[8], [0, 1], [2, 3], [4, 5], [6, 7]]
    """
    budget = sum(weights) / max(1, 8 * n_workers)
    chunks: list[list[int]] = []
    current: list[int] = []
    load = 0.0
    for index, weight in enumerate(weights):
        if current and (load + weight > budget or len(current) >= size):
            chunks.append(current)
            current, load = [], 0.0
        current.append(index)
        load += weight
    if current:
        chunks.append(current)
    # Longest first (Graham's rule): the last chunks to finish are the short ones.
    return sorted(chunks, key=lambda chunk: -sum(weights[i] for i in chunk))


@contextmanager
def progress_bar(total: int, description: str) -> Iterator[Callable[[Any], None]]:
    """A rich progress bar on stderr, drawn only when stderr is a terminal; yields ``advance(_)``, which
    counts one more item done (its argument, an outcome or a record, is ignored)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda _done: bar.advance(task)


def _progress_callback(progress: Any, total: int) -> tuple[Callable[[TaskOutcome], None], Callable[[], None]]:
    """``(on_outcome, close)`` for a ``progress`` argument: None/False, True, a description, or a callable."""
    if progress is None or progress is False:
        return (lambda outcome: None), (lambda: None)
    if callable(progress):
        return progress, (lambda: None)
    stack = ExitStack()
    advance = stack.enter_context(progress_bar(total, progress if isinstance(progress, str) else "tasks"))
    return advance, stack.close


class Executor:
    """A place to run tasks; open one with :func:`open_executor`, close it (or use ``with``).

    One executor can serve several :meth:`map` calls (a Dask cluster is
    started or connected to once).
    """

    kind = "local"

    def __init__(self) -> None:
        self.workers = 1
        self._weights: list[float] | None = None
        #: set when a map was interrupted (Ctrl-C): :meth:`close` stops workers without waiting for their tasks
        self.interrupted = False

    # -- lifecycle
    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release workers (a no-op for ``local``)."""

    def describe(self) -> str:
        """One line for logs: ``local``, ``processes (2 workers)``, ``dask tcp://... (4 workers)``."""
        return self.kind

    # -- running
    def map(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        progress: Any = None,
        retries: int = 1,
        chunksize: int | None = None,
        weights: Sequence[float] | None = None,
    ) -> list[TaskOutcome]:
        """Run ``fn`` on every item; see :func:`map_tasks`."""
        items = list(items)
        outcomes = [TaskOutcome(i, item) for i, item in enumerate(items)]
        if weights is not None:
            weights = [float(w) for w in weights]
            if len(weights) != len(items) or any(not w >= 0 for w in weights):
                raise ValueError("weights: one non-negative number per item is needed")
        self._weights = weights
        on_outcome, close = _progress_callback(progress, len(items))
        try:
            self._run(fn, outcomes, on_outcome, max(0, int(retries)), chunksize)
        except BaseException as exc:
            if is_interrupt(exc):
                self.interrupted = True  # close() then stops the workers instead of waiting for them
            raise
        finally:
            close()
        return outcomes

    def _run(
        self,
        fn: Callable[[Any], Any],
        outcomes: list[TaskOutcome],
        on_outcome: Callable[[TaskOutcome], None],
        retries: int,
        chunksize: int | None,
    ) -> None:
        for outcome in outcomes:
            self._run_here(fn, outcome, on_outcome, retries)

    def _run_here(self, fn: Callable[[Any], Any], outcome: TaskOutcome, on_outcome: Callable[[TaskOutcome], None],
                  retries: int) -> None:
        """Run one item in this process, with its retries, and report it."""
        while True:
            ok, value, detail = _call(fn, outcome.item)
            if self._record(outcome, ok, value, detail, retries):
                break
        on_outcome(outcome)

    @staticmethod
    def _record(outcome: TaskOutcome, ok: bool, value: Any, detail: str | None, retries: int) -> bool:
        """Store one attempt's result; return whether the item is finished."""
        outcome.attempts += 1
        if ok:
            outcome.value, outcome.error, outcome.detail = value, None, None
            return True
        outcome.value, outcome.error, outcome.detail = None, value, detail
        return outcome.attempts > retries


class _FuturesExecutor(Executor):
    """Common driver for executors that hand out futures: chunks out, outcomes in as they complete."""

    def _submit(self, fn: Callable[[Any], Any], chunk: list[tuple[int, Any]]) -> Any:
        raise NotImplementedError

    def _completed(self) -> Iterable[Any]:
        """Futures as they finish, including ones submitted while iterating."""
        raise NotImplementedError

    def _result(self, future: Any) -> list[tuple[int, bool, Any, str | None]]:
        return future.result()

    def _cancel(self) -> None:
        pass

    def _run(self, fn, outcomes, on_outcome, retries, chunksize):  # type: ignore[override]
        if not outcomes:
            return
        size = chunksize or _auto_chunk(len(outcomes), self.workers)
        chunks: dict[Any, list[int]] = {}

        def submit(indices: list[int]) -> None:
            try:
                future = self._submit(fn, [(i, outcomes[i].item) for i in indices])
            except Exception as exc:  # noqa: BLE001 - nowhere left to run: these items fail for good
                detail = traceback.format_exc()
                for i in indices:
                    outcomes[i].attempts += 1
                    outcomes[i].value, outcomes[i].error, outcomes[i].detail = None, _describe(exc), detail
                    on_outcome(outcomes[i])
                return
            chunks[future] = indices

        weights = self._weights
        try:
            if weights is not None:
                for indices in _weighted_chunks(weights, self.workers, chunksize or MAX_CHUNK):
                    submit(indices)
            else:
                for start in range(0, len(outcomes), size):
                    submit(list(range(start, min(start + size, len(outcomes)))))
            if not chunks:
                return
            for future in self._completed():
                indices = chunks.pop(future)
                whole = False
                try:
                    results = self._result(future)
                except Exception as exc:  # noqa: BLE001 - the chunk as a whole failed (pickling, lost worker)
                    whole = True
                    detail = traceback.format_exc()
                    results = [(i, False, _describe(exc), detail) for i in indices]
                again = []
                for index, ok, value, detail in results:
                    outcome = outcomes[index]
                    if self._record(outcome, ok, value, detail, retries):
                        on_outcome(outcome)
                    else:
                        again.append(index)
                if whole:
                    for index in again:  # one of them may be the culprit: each retries on its own
                        submit([index])
                elif again:
                    submit(again)
                if not chunks:
                    break
        except BaseException:
            self._cancel()
            raise


class _PoolExecutor(_FuturesExecutor):
    """A ``concurrent.futures`` process pool (spawn), or an executor object given by the caller."""

    kind = "processes"

    def __init__(self, workers: int | None = None, pool: Any = None) -> None:
        super().__init__()
        self._owned = pool is None
        if pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.workers = workers or os.cpu_count() or 1
            self._context = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)
        else:
            self.workers = workers or getattr(pool, "_max_workers", None) or os.cpu_count() or 1
        self._pool = pool
        self._pending: set[Any] = set()
        self._restarts = 0

    def describe(self) -> str:
        return f"processes ({self.workers} workers)"

    def _submit(self, fn, chunk):  # type: ignore[override]
        from concurrent.futures.process import BrokenProcessPool

        try:
            with children_ignore_interrupts():  # the pool starts its workers as tasks are submitted
                future = self._pool.submit(_run_chunk, fn, chunk)
        except BrokenProcessPool:
            if not self._owned or self._restarts >= MAX_POOL_RESTARTS:
                raise
            self._restarts += 1
            # A worker died (and took the pool with it): carry on with a fresh pool.
            from concurrent.futures import ProcessPoolExecutor

            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)
            with children_ignore_interrupts():
                future = self._pool.submit(_run_chunk, fn, chunk)
        self._pending.add(future)
        return future

    def _completed(self):  # type: ignore[override]
        from concurrent.futures import FIRST_COMPLETED, wait

        while self._pending:
            done, _ = wait(self._pending, return_when=FIRST_COMPLETED)
            for future in done:
                self._pending.discard(future)
                yield future

    def _cancel(self) -> None:
        for future in self._pending:
            future.cancel()
        self._pending.clear()

    def close(self) -> None:
        self._cancel()
        if not self._owned:
            return
        if self.interrupted:
            # The workers ignore Ctrl-C and would finish their chunks first: stop them now (SIGTERM ends a
            # worker silently), then let the pool notice and shut down.
            for process in list((getattr(self._pool, "_processes", None) or {}).values()):
                try:
                    process.terminate()
                except (OSError, ValueError, AttributeError):  # already gone
                    pass
        self._pool.shutdown(wait=True, cancel_futures=True)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class _AutoExecutor(Executor):
    """``auto``: items run here until the rest is estimated long enough for a process pool (module docstring)."""

    kind = "auto"

    def __init__(self, workers: int | None = None) -> None:
        super().__init__()
        self.workers = workers or usable_cpus()
        self.moved = 0  # items the pool ran (0: all ran here)
        self._pool: _PoolExecutor | None = None

    def describe(self) -> str:
        if self._pool is None:
            return "auto: local"
        return f"auto: local, then {self.moved} on {self._pool.describe()}"

    def _run(self, fn, outcomes, on_outcome, retries, chunksize):  # type: ignore[override]
        import time

        weights = self._weights or [1.0] * len(outcomes)
        left = sum(weights)
        done = 0.0
        start = time.perf_counter()
        for position, outcome in enumerate(outcomes):
            elapsed = time.perf_counter() - start
            if (self.workers > 1 and elapsed >= AUTO_PROBE_S and done > 0
                    and elapsed / done * left >= AUTO_POOL_S):
                self._pool = _PoolExecutor(workers=self.workers)
                self._pool._weights = list(weights[position:])
                self.moved = len(outcomes) - position
                self._pool._run(fn, outcomes[position:], on_outcome, retries, chunksize)
                return
            self._run_here(fn, outcome, on_outcome, retries)
            done += weights[position]
            left -= weights[position]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.interrupted = self._pool.interrupted or self.interrupted
            self._pool.close()


class _MapExecutor(Executor):
    """Any object with ``map(fn, iterable)``: items run where it says, outcomes arrive in order."""

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.kind = type(target).__name__
        self._target = target

    def _run(self, fn, outcomes, on_outcome, retries, chunksize):  # type: ignore[override]
        todo = list(range(len(outcomes)))
        while todo:
            again = []
            results = self._target.map(partial(_run_chunk, fn), [[(i, outcomes[i].item)] for i in todo])
            for [(index, ok, value, detail)] in results:
                if self._record(outcomes[index], ok, value, detail, retries):
                    on_outcome(outcomes[index])
                else:
                    again.append(index)
            todo = again


def _worker_version() -> str:
    """collsim's version on a Dask worker (checked when connecting to a cluster)."""
    return __version__


class _DaskExecutor(_FuturesExecutor):
    """A ``dask.distributed`` client: on an existing scheduler, or on a LocalCluster started here."""

    kind = "dask"

    def __init__(self, scheduler: str | None = None, workers: int | None = None, client: Any = None) -> None:
        super().__init__()
        try:
            # importing distributed starts its event loop thread, which later starts the worker processes
            with children_ignore_interrupts():
                from distributed import Client, LocalCluster, as_completed
        except ImportError as err:  # pragma: no cover - dask[distributed] is a dependency
            raise InputError(f"--executor dask needs dask.distributed ({err})", field="--executor") from None
        self._as_completed_cls = as_completed
        self._cluster = None
        self._owned = client is None
        self._ac: Any = None
        if client is not None:
            self._client = client
        elif scheduler is None:
            import logging

            n = workers or os.cpu_count() or 1
            with children_ignore_interrupts():
                self._cluster = LocalCluster(
                    n_workers=n,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    host="127.0.0.1",
                    # the workers' own log lines (a lost heartbeat while the cluster shuts down after Ctrl-C) are
                    # noise to the user: a task's failure comes back as its outcome, with the error
                    silence_logs=logging.CRITICAL,
                )
                self._client = Client(self._cluster, set_as_default=False)
        else:
            address = scheduler if "://" in scheduler else f"tcp://{scheduler}"
            try:
                self._client = Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
            except (OSError, TimeoutError) as err:
                raise InputError(
                    f"cannot connect to the Dask scheduler at {address}: {' '.join(str(err).split()) or type(err).__name__}"
                    " (start one with 'dask scheduler', workers with 'dask worker ADDRESS')",
                    field="--scheduler",
                ) from None
            self._check_workers(address)
        self.scheduler = self._client.scheduler.address
        self.workers = max(1, sum(self._client.nthreads().values()))

    def _check_workers(self, address: str) -> None:
        try:
            if not self._client.nthreads():
                self._client.wait_for_workers(1, timeout=WORKER_WAIT_S)
            versions = self._client.run(_worker_version)
        except Exception as err:  # noqa: BLE001 - no workers, or workers without collsim
            self.close()
            raise InputError(
                f"the Dask cluster at {address} cannot run collsim tasks: {_describe(err)} "
                f"(every worker needs collsim {__version__} installed)",
                field="--scheduler",
            ) from None
        wrong = sorted(f"{worker} has {v}" for worker, v in versions.items() if v != __version__)
        if wrong:
            self.close()
            raise InputError(
                f"Dask workers run another collsim version than this one ({__version__}): "
                + ", ".join(wrong[:4]) + (f" and {len(wrong) - 4} more" if len(wrong) > 4 else ""),
                field="--scheduler",
            )

    def describe(self) -> str:
        where = "local cluster" if self._cluster is not None else self.scheduler
        return f"dask {where} ({self.workers} workers)"

    def _submit(self, fn, chunk):  # type: ignore[override]
        future = self._client.submit(_run_chunk, fn, chunk, pure=False)
        if self._ac is None:
            self._ac = self._as_completed_cls([future], loop=self._client.loop)
        else:
            self._ac.add(future)
        return future

    def _completed(self):  # type: ignore[override]
        # Futures submitted while iterating (retries) join the same as_completed through _submit.
        try:
            yield from self._ac
        finally:
            self._ac = None

    def _cancel(self) -> None:
        ac, self._ac = self._ac, None
        if ac is not None:
            try:
                self._client.cancel(list(ac.futures))
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        if self._owned:
            self._client.close()
            if self._cluster is not None:
                self._cluster.close()


def open_executor(executor: Any = "local", *, workers: int | None = None, scheduler: str | None = None) -> Executor:
    """An :class:`Executor` for ``executor``.

    Parameters
    ----------
    executor : str or object
        ``"local"``, ``"processes"`` or ``"dask"``; or an :class:`Executor`
        (returned as is), a ``distributed.Client``, a
        ``concurrent.futures.Executor``, or any object with ``map(fn, iterable)``
        (these are used, never closed).
    workers : int, optional
        Processes for ``processes``, LocalCluster workers for ``dask`` without
        a scheduler (default: the CPU count).
    scheduler : str, optional
        ``tcp://HOST:PORT`` of a running Dask scheduler (``dask`` only).

    Raises
    ------
    InputError
        Unknown kind, bad worker count, ``scheduler`` with another kind, an
        unreachable scheduler or a cluster whose workers cannot run collsim.
    """
    if isinstance(executor, Executor):
        return executor
    if executor is None:
        executor = "local"
    if not isinstance(executor, str):
        _check_workers(workers)
        module = type(executor).__module__ or ""
        if module.startswith("distributed") and hasattr(executor, "submit") and hasattr(executor, "nthreads"):
            return _DaskExecutor(client=executor)
        from concurrent.futures import Executor as FuturesExecutor

        if isinstance(executor, FuturesExecutor):
            return _PoolExecutor(workers=workers, pool=executor)
        if hasattr(executor, "map"):
            return _MapExecutor(executor)
        raise InputError(f"cannot run tasks on a {type(executor).__name__}", field="--executor", choices=EXECUTORS)
    check_executor_options(executor, workers=workers, scheduler=scheduler)
    if executor == "local":
        return Executor()
    if executor == "auto":
        return _AutoExecutor(workers=workers)
    if executor == "processes":
        return _PoolExecutor(workers=workers)
    return _DaskExecutor(scheduler=scheduler, workers=workers)


def _check_workers(workers: Any) -> None:
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"workers must be a positive whole number, got {workers!r}", field="--workers")


def check_executor_options(executor: Any, *, workers: Any = None, scheduler: str | None = None) -> None:
    """Refuse a bad executor name, worker count or scheduler pairing, without starting anything.

    The checks :func:`open_executor` makes on a name, for a command to run
    before any work (``collsim run`` and ``collsim verify --all`` use it).

    Raises
    ------
    InputError
        Unknown kind (the message lists :data:`EXECUTORS`), a worker count that
        is not a positive whole number or that the kind cannot use, or
        ``scheduler`` with another kind than ``dask``.
    """
    _check_workers(workers)
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor {executor!r}", field="--executor", choices=EXECUTORS)
    if scheduler is not None and executor != "dask":
        raise InputError(f"a scheduler address needs --executor dask, not {executor}", field="--scheduler")
    if executor == "local" and workers not in (None, 1):
        raise InputError("the local executor runs one task at a time; use --executor processes or dask "
                         "for more workers", field="--workers")
    if executor == "dask" and scheduler is not None and workers is not None:
        raise InputError("--workers sizes a local Dask cluster; a running scheduler brings its own workers",
                         field="--workers")


def map_tasks(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    executor: Any = "local",
    *,
    progress: Any = None,
    workers: int | None = None,
    scheduler: str | None = None,
    retries: int = 1,
    chunksize: int | None = None,
    weights: Sequence[float] | None = None,
) -> list[TaskOutcome]:
    """Run ``fn(item)`` for every item on ``executor``; one :class:`TaskOutcome` per item, in item order.

    Parameters
    ----------
    fn : callable
        A module-level function of one argument (pickled by reference for
        ``processes`` and ``dask``).
    items : iterable
        Picklable arguments.
    executor : str or object
        ``"local"`` (default), ``"processes"``, ``"dask"``, an :class:`Executor`
        from :func:`open_executor` (kept open, for several calls), or any
        object :func:`open_executor` accepts.
    progress : None, bool, str or callable
        ``callable(outcome)`` is called in this thread as each item finishes
        (completion order); ``True`` or a description shows a rich progress
        bar on stderr (when it is a terminal).
    workers, scheduler : optional
        As for :func:`open_executor`, when ``executor`` is a name.
    retries : int
        Extra attempts for an item whose call raised (default 1).
    chunksize : int, optional
        Items per worker task (default: about eight tasks per worker, at most 64 items).
    weights : sequence of float, optional
        Relative cost of each item: chunks then carry about equal cost (and at
        most ``chunksize`` items) and the costliest are sent first (``local``
        runs items in order regardless).

    Returns
    -------
    list of TaskOutcome
        ``outcome.value`` or ``outcome.error`` for each item, in the order given.
    """
    handle = open_executor(executor, workers=workers, scheduler=scheduler)
    owned = handle is not executor
    try:
        return handle.map(fn, items, progress=progress, retries=retries, chunksize=chunksize, weights=weights)
    finally:
        if owned:
            handle.close()


def executor_label(executor: Any) -> str:
    """A short description of where tasks run (for summaries)."""
    if isinstance(executor, Executor):
        return executor.describe()
    return str(executor or "local")
