"""Running cells under limits: each cell in a child process forked from a cell server.

A cell server is a single-threaded process with relaygraph imported; for each cell it forks a
child that sets its address-space limit (``resource.RLIMIT_AS``) and an alarm, runs the cell and
writes its result to a pipe. The server waits at most the time limit, then kills the child. So a
cell that crashes, runs out of memory or hangs becomes a result with the reason, and the server
(and the worker that owns it) goes on. Local runs fork their servers from the driver's main thread
before any thread starts; a Dask worker (threaded) starts its server as a fresh Python process.
"""

from __future__ import annotations

import json
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["CellServer", "execute", "run_limited", "serve"]

_GRACE = 5.0  # seconds the child's own alarm waits beyond the limit the server enforces
_FORKED_ENDS: set[int] = set()  # the driver's ends of the pipes to forked servers


def _send(fd: int, obj) -> None:
    data = pickle.dumps(obj)
    view = memoryview(struct.pack("<Q", len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _recv(fd: int):
    head = _read_exactly(fd, 8)
    if head is None:
        return None
    data = _read_exactly(fd, struct.unpack("<Q", head)[0])
    return None if data is None else pickle.loads(data)


def _child(job: dict, wfd: int) -> None:
    """In the forked child: limits, the cell, its result on ``wfd``; never returns."""
    code = 0
    try:
        limits = job["limits"]
        if limits.get("memory_limit"):
            import resource

            size = int(limits["memory_limit"] * 2**20)
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if limits.get("time_limit"):
            signal.alarm(int(limits["time_limit"] + _GRACE))  # dies even if its server is gone
        from .tasks import run_cell

        try:
            result = run_cell(job["kind"], job["params"], job["base"])
        except MemoryError:
            result = {"error": f"memory limit exceeded ({limits['memory_limit']:g} MB)",
                      "reason": "memory"}
        os.write(wfd, json.dumps(result, default=str).encode())
    except BaseException as exc:  # noqa: BLE001 - report whatever happened before exiting
        code = 1
        try:
            os.write(wfd, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def run_limited(job: dict) -> dict:
    """Fork a child for one cell and wait for it under the time limit (call from one thread only)."""
    from .tasks import warm

    warm(job["kind"])
    time_limit = job["limits"].get("time_limit")
    rfd, wfd = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(job, wfd)
    os.close(wfd)
    data, timed_out = bytearray(), False
    try:
        while True:
            wait = None if time_limit is None else time_limit - (time.perf_counter() - start)
            if wait is not None and wait <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([rfd], [], [], wait)
            if not ready:
                continue
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(rfd)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    if timed_out:
        return {"error": f"time limit exceeded: killed after {time_limit:g} s", "reason": "time",
                "wall_seconds": elapsed}
    try:
        result = json.loads(data.decode()) if data else None
    except ValueError:
        result = None
    if result is None:
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            why = f"crashed: killed by signal {name}"
            if sig == signal.SIGALRM:
                why = "time limit exceeded: the cell's own alarm fired"
            result = {"error": why, "reason": "crash"}
        else:
            result = {"error": f"crashed: exit code {os.WEXITSTATUS(status)} without a result",
                      "reason": "crash"}
    result["wall_seconds"] = elapsed
    return result


def serve(rfd: int, wfd: int) -> None:
    """The cell server's loop: a job in, its result out, until the input closes."""
    while True:
        job = _recv(rfd)
        if job is None:
            return
        _send(wfd, run_limited(job))


class CellServer:
    """A cell server process and the pipes to it; ``run(job)`` from one thread at a time."""

    def __init__(self, fork: bool) -> None:
        if fork:  # from a single-threaded driver: inherits everything imported (and patched)
            to_r, to_w = os.pipe()
            from_r, from_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(to_w)
                os.close(from_r)
                for fd in _FORKED_ENDS:  # other servers' ends: their EOF must not wait for this one
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                try:
                    serve(to_r, from_w)
                finally:
                    os._exit(0)
            os.close(to_r)
            os.close(from_w)
            self.pid, self._proc = pid, None
            self._w, self._r = to_w, from_r
            _FORKED_ENDS.update((to_w, from_r))
        else:
            root = str(Path(__file__).resolve().parents[2])  # this relaygraph, wherever it lives
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
            self._proc = subprocess.Popen([sys.executable, "-m", "relaygraph.study.worker"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            self.pid = self._proc.pid
            self._w, self._r = self._proc.stdin.fileno(), self._proc.stdout.fileno()

    def run(self, job: dict) -> dict:
        """One cell's result; a server that died gives an error result (and must be replaced)."""
        try:
            _send(self._w, job)
            result = _recv(self._r)
        except OSError:
            result = None
        if result is None:
            self.dead = True
            return {"error": "crashed: the cell server died", "reason": "crash"}
        return result

    dead = False

    def close(self) -> None:
        """End the server (its input closes, it exits) and reap it."""
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.stdout.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            return
        for fd in (self._w, self._r):
            _FORKED_ENDS.discard(fd)
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


_IDLE: queue.SimpleQueue = queue.SimpleQueue()  # this process's cell servers not in use
_MACHINE: list[str] = []


def prestart() -> int:
    """Start one cell server in this process ahead of the first cell; returns its pid."""
    server = CellServer(fork=False)
    _IDLE.put(server)
    return server.pid


def execute(job: dict) -> dict:
    """Run one cell in one of this process's cell servers (started when none is idle): the
    function a Dask worker runs for each cell."""
    try:
        server = _IDLE.get_nowait()
    except queue.Empty:
        server = CellServer(fork=False)
    started = time.time()
    result = server.run(job)
    if server.dead:
        server.close()
    else:
        _IDLE.put(server)
    if not _MACHINE:
        from .store import machine

        _MACHINE.append(machine())
    result.update(worker=f"{os.uname().nodename}:{os.getpid()}", machine=_MACHINE[0], started=started,
                  finished=time.time())
    return result


if __name__ == "__main__":
    _out = os.dup(1)
    os.dup2(2, 1)  # what a cell prints goes to stderr, not into the result pipe
    serve(0, _out)
