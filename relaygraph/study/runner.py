"""Running a study: the cells not yet done, on local processes or a Dask cluster, each result
written to the database as it arrives."""

from __future__ import annotations

import json
import os
import queue
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from ..errors import OptionError
from .spec import Cell, Spec, StudyError, load_spec, parse_spec
from .store import Store

__all__ = ["run", "resolve_spec", "default_database", "parse_cluster", "dask_modules"]


def resolve_spec(spec) -> Spec:
    """A Spec from a Spec, a path to a TOML file, or a dict (relative paths from the cwd)."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, dict):
        return parse_spec(spec)
    if isinstance(spec, (str, os.PathLike)):
        return load_spec(spec)
    raise StudyError(f"a study spec is a path to a TOML file, a dict or a Spec, got {type(spec).__name__}")


def default_database(spec: Spec) -> Path:
    """Where a spec's results go when no database is named: ``[study] database``, else next to
    the spec file with the suffix ``.sqlite``."""
    if spec.database is not None:
        return spec.database
    if spec.path is not None:
        return spec.path.with_suffix(".sqlite")
    raise StudyError("a spec given as a dict needs database = ... in [study] or a db argument")


def parse_cluster(text: str) -> int:
    """The worker count of ``local:N``."""
    head, _, count = text.partition(":")
    if head != "local" or not count.isdigit() or int(count) < 1:
        raise OptionError(f"--cluster takes local:N (N workers on this machine), got {text!r}; "
                          "for a running cluster give --scheduler tcp://HOST:PORT")
    return int(count)


def dask_modules():
    """``(distributed, KilledWorker)``, or StudyError naming the extra to install."""
    try:
        import distributed
        from distributed import KilledWorker
    except ImportError:
        raise StudyError("running on Dask needs dask and distributed: pip install 'relaygraph[study]' "
                         "(or run with --jobs N on local processes)") from None
    return distributed, KilledWorker


def run(spec, db=None, *, jobs: int = 1, cluster: str | None = None, scheduler: str | None = None,
        retry_failed: bool = False, new: bool = False, progress="auto", isolate: bool = True,
        on_result: Callable[[Cell, dict], None] | None = None) -> dict:
    """Run the cells of ``spec`` not yet done in ``db``; returns counts and the database's path.

    ``jobs`` local processes, or ``cluster="local:N"`` (a Dask LocalCluster) or ``scheduler``
    (a running Dask scheduler's address). Each result is committed as it arrives; ``on_result``
    sees each cell and its row. ``isolate=False`` with one job runs cells in this process.
    """
    from ..progress import phase
    from ..validate import positive

    spec = resolve_spec(spec)
    positive("jobs", jobs, integer=True, allow_none=False)
    if cluster is not None and scheduler is not None:
        raise OptionError("give --cluster or --scheduler, not both")
    workers = parse_cluster(cluster) if cluster is not None else None
    if workers is not None or scheduler is not None:
        dask_modules()
    path = Path(db) if db is not None else default_database(spec)
    store = Store(path, spec.hash, _spec_text(spec), new=new)
    try:
        store.set_meta("cells", json.dumps([c.key for c in spec.cells]))
        if spec.path is not None:
            store.set_meta("spec_path", str(spec.path))
        recorded = store.status()
        todo = [c for c in spec.cells
                if c.key not in recorded or (retry_failed and recorded[c.key] == "failed")]
        counts = {"cells": len(spec.cells), "skipped": len(spec.cells) - len(todo), "done": 0,
                  "failed": 0, "database": str(path), "spec_hash": spec.hash}
        bar = phase("study", total=len(todo), unit="cell", progress=progress, every=2.0)
        start = time.perf_counter()
        base = str(spec.path.parent if spec.path is not None else Path.cwd())
        jobs_of = {c.key: {"kind": c.kind, "params": _resolved(c.params, base), "base": base,
                           "limits": spec.limits()} for c in todo}
        try:
            if scheduler is not None or workers is not None:
                results = _dask(todo, jobs_of, scheduler, workers)
            else:
                results = _local(todo, jobs_of, jobs, isolate)
            for n, (cell, result, started, finished) in enumerate(results, 1):
                row = store.write(cell, result, started, finished, "driver")
                counts[row["status"]] += 1
                if on_result is not None:
                    on_result(cell, row)
                elapsed = time.perf_counter() - start
                left = len(todo) - n
                eta = elapsed / n * left
                bar.step(f"done {counts['done']}, failed {counts['failed']}, remaining {left}, "
                         f"ETA {_duration(eta)}")
            bar.done(f"{counts['done']} done, {counts['failed']} failed")
        finally:
            bar.close()
        counts["seconds"] = time.perf_counter() - start
        return counts
    finally:
        store.close()


def _resolved(params: dict, base: str) -> dict:
    """A cell's parameters with its input as an absolute path (variables expanded here, so the
    workers need not have them)."""
    if "input" not in params:
        return params
    return dict(params, input=os.path.abspath(os.path.join(base, os.path.expandvars(params["input"]))))


def _spec_text(spec: Spec) -> str:
    if spec.path is not None:
        try:
            return spec.path.read_text()
        except OSError:
            pass
    return repr(spec.tasks)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _local(todo: list[Cell], jobs_of: dict, jobs: int, isolate: bool):
    """(cell, result, started, finished) as cells finish on ``jobs`` local cell servers."""
    from .tasks import run_cell
    from .worker import CellServer

    if not todo:
        return
    if jobs == 1 and not isolate:
        for cell in todo:
            started = time.time()
            job = jobs_of[cell.key]
            yield cell, run_cell(job["kind"], job["params"], job["base"]), started, time.time()
        return
    from .tasks import warm

    for kind in dict.fromkeys(c.kind for c in todo):
        warm(kind)  # imported once here, inherited by every server and cell
    # forked now, from this thread, before the pool starts any other
    servers: queue.Queue = queue.Queue()
    # A driver that has loaded egglog may hold its runtime's worker threads, which a fork does not
    # copy (a forked cell would wait for them forever): then the servers start as fresh processes.
    fork = "egglog" not in sys.modules
    made = [CellServer(fork=fork) for _ in range(min(jobs, len(todo)))]
    for s in made:
        servers.put(s)

    def one(cell: Cell):
        server = servers.get()
        started = time.time()
        try:
            result = server.run(jobs_of[cell.key])
        finally:
            if server.dead:  # a new one, as a fresh process: this thread must not fork
                server = CellServer(fork=False)
                made.append(server)
            servers.put(server)
        result.setdefault("worker", f"local:{server.pid}")
        return cell, result, started, time.time()

    pool = ThreadPoolExecutor(max_workers=len(made))
    try:
        futures = [pool.submit(one, c) for c in todo]
        for future in as_completed(futures):
            yield future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for s in made:
            s.close()
        pool.shutdown(wait=True)


def _dask(todo: list[Cell], jobs_of: dict, scheduler: str | None, workers: int | None):
    """(cell, result, started, finished) as cells finish on a Dask cluster; a cell whose worker
    was lost (past the scheduler's retries) or that raised comes back as a failed result."""
    import logging
    import uuid

    distributed, KilledWorker = dask_modules()
    from .worker import execute

    if not todo:
        return
    cluster = None
    try:
        if workers is not None:
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               memory_limit=0, dashboard_address=":0",
                                               silence_logs=logging.ERROR)
            client = distributed.Client(cluster)
        else:
            try:
                client = distributed.Client(scheduler, timeout=20)
            except (OSError, TimeoutError, ValueError) as exc:
                raise StudyError(f"--scheduler {scheduler}: cannot connect: {exc}") from None
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    try:
        from .worker import prestart

        try:
            client.run(prestart)  # every worker starts its cell server now, in parallel
        except Exception:  # noqa: BLE001 - a worker that cannot is reported by its first cell
            pass
        tag = uuid.uuid4().hex[:8]
        futures = {}
        for i, cell in enumerate(todo):
            fut = client.submit(execute, jobs_of[cell.key], key=f"cell-{tag}-{i}", pure=False)
            futures[fut] = (cell, time.time())
        for fut in distributed.as_completed(futures):
            cell, submitted = futures[fut]
            try:
                result = fut.result()
            except Exception as exc:  # noqa: BLE001 - one cell's row, whatever the cluster raised
                # a cell's own failures come back as results (execute runs it in a cell server), so
                # anything raised here is the cluster's: the worker died (KilledWorker, a closed
                # connection, a future cancelled or an event loop torn down with it)
                text = str(exc) if isinstance(exc, KilledWorker) else f"{type(exc).__name__}: {exc}"
                result = {"error": f"worker lost: {text}", "reason": "lost"}
            finished = result.get("finished", time.time())  # on the worker's clock, as started
            started = result.get("started", finished - result.get("wall_seconds", 0.0))
            yield cell, result, started, finished
            fut.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
