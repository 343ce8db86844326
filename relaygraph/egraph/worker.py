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
and then after any iteration where serializing costs less than 50 ms or at most a quarter of the
time spent since the last checkpoint (estimated from the last serialization's time per e-node).
When the parent kills the child it keeps the last checkpoint: the e-graph rolls back to that
iteration, at once extractable. When the child stops by itself it serializes its final state; if
that overruns the grace period the parent keeps the final journal and serializes on first use.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection

from ..errors import RelayError, RuleError

__all__ = ["saturate_in_worker"]

_CHECKPOINT_SHARE = 0.25  # a checkpoint may cost this share of the time since the last one
_CHECKPOINT_FREE = 0.05  # seconds: a checkpoint this cheap is always taken
_GRACE = 10.0  # seconds allowed past the deadline for the final serialization, at least


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
    proc, send, recv = _spawn()
    time_limit = options["time_limit"]
    deadline = None  # set when the child has rebuilt the e-graph: the limit is on saturation proper
    report = SaturationReport("iter-limit", [], {}, 0.0, {}, "worker", egraph=egraph)
    delta: list = []  # the child's journal entries, in order
    checkpoint = None  # (iteration, journal entries it covers, document, sizes)
    limit = "" if time_limit is None else f", a hard time limit of {time_limit:g} s"
    bar = progress_bar(options["iter_limit"], options["progress"], f"in a worker process{limit}")
    child_options = dict(options, progress=False)
    try:
        send(("start", egraph.journal, egraph.root, specs, child_options))
        stopped = None
        while True:
            wait = None if deadline is None else deadline - time.perf_counter()
            if stopped is not None:
                wait = stopped
            message = _receive(recv, proc, wait)
            if message is None:  # the deadline passed: stop the child where it is
                if stopped is not None:
                    report.notes.append("the final serialization overran; the e-graph is rebuilt when used")
                    egraph.adopt(delta)
                    break
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
                    report.initial_nodes, report.initial_classes = message[4]
                    if time_limit is not None:
                        deadline = time.perf_counter() + time_limit
            elif kind == "python":
                _, pending, types, next_handle = message
                graph = _RemoteGraph(egraph, types, next_handle)
                try:
                    count = apply_here(python, pending, graph, deadline)
                except RuleError as exc:
                    send(("abort",))
                    raise RuleError(exc.message) from None
                except Overrun:
                    report.stop_reason = "time-limit-hard"
                    _roll_back(egraph, report, checkpoint, delta, time_limit)
                    break
                send(("batch", graph.builder.take(), count))
            elif kind == "stopped":
                _, reason, state_iteration, entries, estimate = message
                delta.extend(entries)
                report.stop_reason, report.state_iteration = reason, state_iteration
                stopped = max(_GRACE, 4 * estimate)
            elif kind == "document":
                egraph.adopt(delta, message[1], message[2])
                break
            elif kind == "error":
                _, cls, text = message
                raise (RuleError if cls == "RuleError" else RelayError)(text)
        bar.done(stop_info(report))
    finally:
        bar.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
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


def _spawn():
    """Start the worker with a pipe each way (file descriptors passed on the command line)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "relaygraph.egraph.worker", str(down_r), str(up_w)],
                            pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL)
    os.close(down_r)
    os.close(up_w)
    down = Connection(down_w, readable=False)
    up = Connection(up_r, writable=False)
    return proc, down.send, up


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


# -- the child ------------------------------------------------------------------------------------

def _child(down: Connection, up: Connection) -> None:
    from .bridge import RelayEGraph
    from .readback import gym_document
    from .saturation import Saturator
    from .typer import type_to_data

    _, journal, root, specs, options = down.recv()
    egraph = RelayEGraph.from_journal(journal, root)
    sent = len(journal)
    clock = {"last": 0.0, "rate": 0.0}

    def fresh_entries() -> list:
        nonlocal sent
        entries = egraph.journal[sent:]
        sent = len(egraph.journal)
        return entries

    def serialize():
        t = time.perf_counter()
        snap = egraph.snapshot()
        doc = gym_document(snap, egraph.state, [root])
        took = time.perf_counter() - t
        clock["rate"] = took / max(1, snap.num_nodes)
        clock["last"] = time.perf_counter()
        return doc, egraph.sizes()

    egraph.materialize()  # rebuild the e-graph first, so the serialization below is timed alone
    doc, sizes = serialize()
    up.send(("checkpoint", 0, fresh_entries(), doc, sizes))
    start = time.perf_counter()  # the time limit counts from here, as in the parent

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

    saturator = Saturator(egraph, specs, None, apply_python=apply_python, on_iteration=on_iteration,
                          **options)
    report = saturator.run(start)
    estimate = clock["rate"] * report.nodes
    up.send(("stopped", report.stop_reason, report.state_iteration, fresh_entries(), estimate))
    up.send(("document", *serialize()))


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
