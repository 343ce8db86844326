"""Saturation in a worker process, so that a time limit can stop an iteration that runs too long.

A running egglog call cannot be interrupted, so the e-graph lives in a child process
(``python -m relaygraph.egraph.worker``, started fresh: a forked copy of a process that has run
egglog can hang in its thread pool) and the parent kills it at the deadline. Nothing egglog
makes can be pickled, so the child rebuilds the e-graph from the journal of batches and egglog
text that made it (``RelayEGraph.from_journal``) and sends back journal entries, sizes and
serialized e-graphs. The rules' Python halves run in the parent, which holds the Relay objects:
the child sends their new matches and the types of the matched classes, and gets a batch back.

What survives a kill. After every iteration the child sends the journal entries the iteration
added (cheap). It also sends a checkpoint, the e-graph serialized for extraction, after loading
and then after any iteration where serializing costs less than 2 ms or at most a quarter of the
time spent since the last checkpoint (estimated from the last serialization's time per e-node).
When the parent kills the child it keeps the last checkpoint: the e-graph rolls back to that
iteration, at once extractable.

When the child stops by itself it keeps its final e-graph and sends only its sizes and the last
journal entries, so saturation ends as soon as the rules do. The parent's e-graph asks the child
for the serialization the first time it is needed (extraction); if the parent's e-graph changes
first, or the child is gone, it is rebuilt from the journal instead. A child that finished
cleanly is reused by the next saturation in this process (``_acquire``), so the cost of starting
Python and loading relaygraph is paid once.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from multiprocessing.connection import Connection

from ..errors import RelayError, RuleError

__all__ = ["saturate_in_worker"]

_DIR_ENV = "RELAYGRAPH_WORKER_DIR"  # the child's own temporary directory, which it removes as it ends
_CHECKPOINT_SHARE = 0.25  # a checkpoint may cost this share of the time since the last one
_CHECKPOINT_FREE = 0.002  # seconds: a checkpoint this cheap is always taken


class _RemoteGraph:
    """What a Python rewrite sees in the parent: types of the matched classes, add and union."""

    def __init__(self, egraph, types: dict, next_handle: int) -> None:
        from .batches import BatchBuilder, GraphState
        from .typer import type_from_data

        state = GraphState()
        state.handle_type = {h: type_from_data(d) for h, d in types.items()}
        state.next_handle = next_handle
        self.builder = BatchBuilder(state, egraph.tables)
        self.builder.checked = egraph.builder.checked  # the program's types, for its variables

    def type_of(self, handle: int):
        return self.builder.type_of(handle)

    def add_expr(self, expr, leaves=None) -> int:
        return self.builder.add_expr(expr, leaves)

    def union(self, a: int, b: int) -> None:
        self.builder.union(a, b)

    def handle(self, value) -> int:
        raise RelayError("egglog values are not available to Python rewrites in a worker; use the "
                         "handles in the bindings")


def saturate_in_worker(egraph, specs, python: dict, options: dict):
    """Run saturation in a child process under a hard time limit; the parent's e-graph follows."""
    from .saturation import (
        IterationStats,
        Overrun,
        SaturationReport,
        progress_bar,
        record_iteration,
        report_limits,
        stop_info,
        tally_matches,
    )
    from .saturation import apply_python_rewrites as apply_here

    if os.name != "posix":
        raise NotImplementedError("the hard time limit needs a POSIX system; saturate with isolate=False")
    start = time.perf_counter()
    egraph.flush()
    worker = _acquire()
    time_limit = options["time_limit"]
    deadline = None  # set when the child has rebuilt the e-graph: the limit is on saturation proper
    report = SaturationReport("iter-limit", [], {}, 0.0, {}, "worker", egraph=egraph)
    delta: list = []  # the child's journal entries, in order
    checkpoint = None  # (iteration, journal entries it covers, document, sizes)
    limit = "" if time_limit is None else f", a hard time limit of {time_limit:g} s"
    bar = progress_bar(options["iter_limit"], options["progress"], f"in a worker process{limit}")
    child_options = dict(options, progress=False)
    kept = False  # the child finished cleanly and keeps the final state for the parent's e-graph
    try:
        worker.send(("start", egraph.journal, egraph.root, specs, child_options))
        while True:
            wait = None if deadline is None else deadline - time.perf_counter()
            message = _receive(worker.recv, worker.proc, wait)
            if message is None:  # the deadline passed: stop the child where it is
                report.stop_reason = "time-limit-hard"
                _roll_back(egraph, report, checkpoint, delta, time_limit)
                break
            kind = message[0]
            if kind == "iteration":
                stats: IterationStats = message[1]
                delta.extend(message[2])
                record_iteration(report, stats, bar)
            elif kind == "checkpoint":
                delta.extend(message[2])
                checkpoint = (message[1], len(delta), message[3], message[4])
                if message[1] == 0:
                    report.load_seconds = time.perf_counter() - start
                    report.initial_nodes, report.initial_classes = message[4]
                    if time_limit is not None:
                        deadline = time.perf_counter() + time_limit
            elif kind == "python":
                _, pending, types, next_handle = message
                graph = _RemoteGraph(egraph, types, next_handle)
                try:
                    count = apply_here(python, pending, graph, deadline)
                except RuleError as exc:
                    worker.send(("abort",))
                    raise RuleError(exc.message) from None
                except Overrun:
                    report.stop_reason = "time-limit-hard"
                    _roll_back(egraph, report, checkpoint, delta, time_limit)
                    break
                worker.send(("batch", graph.builder.take(), count))
            elif kind == "stopped":
                _, reason, state_iteration, entries, sizes = message
                delta.extend(entries)
                report.stop_reason, report.state_iteration = reason, state_iteration
                ran = time.perf_counter() - start - report.load_seconds
                egraph.adopt(delta, None, sizes, FinalState(worker, ran))
                kept = True
                break
            elif kind == "error":
                _, cls, text = message
                raise (RuleError if cls == "RuleError" else RelayError)(text)
        bar.done(stop_info(report))
    finally:
        bar.close()
        if not kept:
            worker.kill()
    tally_matches(report)
    report.limits = report_limits(options)
    report.seconds = time.perf_counter() - start
    return report


def _roll_back(egraph, report, checkpoint, delta: list, time_limit: float) -> None:
    running = len(report.iterations) + 1
    if checkpoint is None:
        raise RelayError(f"the time limit of {time_limit} s passed before the worker had loaded the e-graph; "
                         f"raise time_limit")
    iteration, covered, document, sizes = checkpoint
    egraph.adopt(delta[:covered], document, sizes)
    report.state_iteration = iteration
    report.notes.append(f"iteration {running} was still running at the time limit; the e-graph holds the "
                        f"state after iteration {iteration} (the last checkpoint)")


# -- the child processes ----------------------------------------------------------------------------

class _Worker:
    """One child process and the pipes to it."""

    def __init__(self) -> None:
        # The child's temporary files go in a directory this process removes: a killed child
        # cannot remove its own.
        self.tmpdir = tempfile.mkdtemp(prefix="relaygraph-worker-")
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.tmpdir, True)
        self.proc, self.down, self.recv = _spawn(self.tmpdir)
        self.send = self.down.send

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.down.close()
        self.recv.close()
        self._cleanup()

    def close(self) -> None:
        """Ask the child to exit (it does at once when idle); kill it if it does not."""
        try:
            self.send(("quit",))
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


_POOL_LOCK = threading.RLock()  # re-entrant: a FinalState may be collected while it is held
_IDLE: list[_Worker] = []  # at most one idle child, reused by the next saturation
_MAX_IDLE = 1
_HELD: list = []  # weak references to the FinalStates whose child still holds an e-graph, oldest first
_REBUILD_CHEAPER = 1.0  # seconds of saturation under which replaying it beats starting a process
_MAX_HELD = 2  # more held e-graphs than this: the oldest is let go (rebuilt from its journal if used)


def _acquire() -> _Worker:
    """An idle child if there is a healthy one; else the child of the oldest e-graph still held
    whose saturation took under a second (rebuilt from its journal if it is used again, which
    costs about that: less than starting a process); else a new one."""
    for attempt in range(2):
        with _POOL_LOCK:
            while _IDLE:
                worker = _IDLE.pop()
                if worker.alive():
                    return worker
                worker.kill()
            cheap = [f for f in (r() for r in _HELD) if f is not None and f.seconds < _REBUILD_CHEAPER]
            oldest = cheap[0] if cheap and attempt == 0 else None
        if oldest is None:
            break
        oldest.drop()  # its child frees that e-graph and becomes idle
    return _Worker()


def _release(worker: _Worker) -> None:
    """A child that holds nothing anyone needs: keep it for the next saturation, or close it."""
    with _POOL_LOCK:
        if worker.alive() and len(_IDLE) < _MAX_IDLE:
            _IDLE.append(worker)
            return
    worker.close()


@atexit.register
def _close_idle() -> None:
    with _POOL_LOCK:
        idle, _IDLE[:] = list(_IDLE), []
    for worker in idle:
        worker.close()


class FinalState:
    """A child that still holds a saturated e-graph; it serializes it once, when asked."""

    def __init__(self, worker: _Worker, seconds: float = 0.0) -> None:
        self._worker: _Worker | None = worker
        self.seconds = seconds  # how long the saturation it holds took (what a replay would cost)
        self._lock = threading.Lock()
        with _POOL_LOCK:
            _HELD[:] = [r for r in _HELD if r() is not None]
            _HELD.append(weakref.ref(self))
            surplus = [r() for r in _HELD[:-_MAX_HELD]] if len(_HELD) > _MAX_HELD else []
        for old in surplus:
            if old is not None:
                old.drop()

    def _take(self) -> _Worker | None:
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            with _POOL_LOCK:
                _HELD[:] = [r for r in _HELD if r() is not None and r() is not self]
        return worker

    def fetch(self) -> dict | None:
        """The e-graph's extraction-gym document, or None if the child is gone."""
        worker = self._take()
        if worker is None:
            return None
        try:
            worker.send(("document",))
            message = _receive(worker.recv, worker.proc, None)
        except (OSError, RelayError):
            worker.kill()
            return None
        if message[0] != "document":
            worker.kill()
            return None
        _release(worker)
        return message[1]

    def drop(self) -> None:
        """Nobody will ask: the child frees the e-graph and becomes idle."""
        worker = self._take()
        if worker is None:
            return
        try:
            worker.send(("drop",))
        except OSError:
            worker.kill()
            return
        _release(worker)

    def __del__(self) -> None:
        try:
            self.drop()
        except Exception:  # noqa: BLE001 - at interpreter exit the pipes may already be gone
            pass


def _spawn(tmpdir: str):
    """Start the worker with a pipe each way (file descriptors passed on the command line), its
    temporary files in ``tmpdir``."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "relaygraph.egraph.worker", str(down_r), str(up_w)],
                            pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": tmpdir, _DIR_ENV: tmpdir})
    os.close(down_r)
    os.close(up_w)
    return proc, Connection(down_w, readable=False), Connection(up_r, writable=False)


def _receive(conn: Connection, proc, timeout: float | None):
    """The next message, or None when ``timeout`` passes first; an error if the child died."""
    if timeout is not None and not conn.poll(max(0.0, timeout)):
        return None
    try:
        return conn.recv()
    except EOFError:
        proc.wait()
        raise RelayError(f"the saturation worker exited without an answer (exit code {proc.returncode}); "
                         f"it may have run out of memory") from None


def _serializer(egraph, root: int, clock: dict):
    from .readback import gym_document

    def serialize():
        t = time.perf_counter()
        snap = egraph.snapshot()
        doc = gym_document(snap, egraph.state, [root])
        took = time.perf_counter() - t
        clock["rate"] = took / max(1, snap.num_nodes)
        clock["last"] = time.perf_counter()
        return doc, egraph.sizes()

    return serialize


def _job(message: tuple, down: Connection, up: Connection):
    """One saturation; returns the e-graph it leaves (kept until the parent asks or moves on)."""
    from .bridge import RelayEGraph
    from .saturation import Saturator
    from .typer import type_to_data

    _, journal, root, specs, options = message
    egraph = RelayEGraph.from_journal(journal, root)
    sent = len(journal)
    clock = {"last": 0.0, "rate": 0.0}

    def fresh_entries() -> list:
        nonlocal sent
        entries = egraph.journal[sent:]
        sent = len(egraph.journal)
        return entries

    serialize = _serializer(egraph, root, clock)

    def on_iteration(stats) -> None:
        up.send(("iteration", stats, fresh_entries()))
        since = time.perf_counter() - clock["last"]
        if clock["rate"] * stats.nodes <= max(_CHECKPOINT_FREE, _CHECKPOINT_SHARE * since):
            document, sizes = serialize()
            up.send(("checkpoint", stats.index, fresh_entries(), document, sizes))

    def apply_python(pending) -> bool:
        handles = {h for bindings_list in pending.values() for b in bindings_list for h in b.values()}
        types = {h: type_to_data(egraph.state.handle_type[h]) for h in handles}
        up.send(("python", pending, types, egraph.state.next_handle))
        reply = down.recv()
        if reply[0] != "batch":
            raise SystemExit(0)  # the parent is raising the rule's error
        egraph.apply_batch(reply[1])
        return reply[2] > 0

    egraph.materialize()  # rebuild the e-graph first, so the serialization below is timed alone
    # set up before the clock starts, as in process (saturate() builds the Saturator, whose run()
    # starts the clock): its set-up (0.4 ms for BERT's unconditional rules) counts as loading
    saturator = Saturator(egraph, specs, None, apply_python=apply_python, on_iteration=on_iteration,
                          **options)
    doc, sizes = serialize()
    up.send(("checkpoint", 0, fresh_entries(), doc, sizes))
    start = time.perf_counter()  # the time limit counts from here, as in the parent
    report = saturator.run(start)
    up.send(("stopped", report.stop_reason, report.state_iteration, fresh_entries(), egraph.sizes()))
    return egraph, serialize


def _child(down: Connection, up: Connection) -> None:
    """Serve saturations until told to quit (or the parent goes away)."""
    kept = None  # (e-graph, its serializer) of the last saturation, until asked for or dropped
    while True:
        message = down.recv()
        kind = message[0]
        if kind == "quit":
            return
        if kind == "drop":
            kept = None
        elif kind == "document":
            if kept is None:
                up.send(("gone",))
            else:
                up.send(("document", *kept[1]()))
                kept = None
        elif kind == "start":
            kept = None  # free the last e-graph before building the next
            kept = _job(message, down, up)


def main(argv: list[str]) -> int:
    """Worker entry point: ``python -m relaygraph.egraph.worker <read fd> <write fd>``."""
    down = Connection(int(argv[0]), writable=False)
    up = Connection(int(argv[1]), readable=False)
    try:
        _child(down, up)
    except (RuleError, RelayError) as exc:
        up.send(("error", type(exc).__name__, getattr(exc, "message", str(exc))))
    except EOFError:
        return 0  # the parent went away
    except Exception as exc:  # anything else: the parent reports it with the worker's traceback
        tail = "".join(traceback.format_exception(exc)[-3:])
        up.send(("error", "RelayError", f"the saturation worker failed: {type(exc).__name__}: {exc}\n{tail}"))
    finally:
        # The directory the parent made for this child's files: removed here too, as a parent
        # that ends without its clean-up (os._exit, as a study's forked cell does) cannot.
        own = os.environ.get(_DIR_ENV)
        if own:
            shutil.rmtree(own, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
