# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""Helpers for tests of tuning: devices behind an RPC tracker, interrupted tuning
processes, and waiting for a condition with a deadline.

- :class:`LoopbackDevices` starts an RPC tracker and RPC servers registered with
  it under one key on the loopback interface, as a tracker and its devices run
  on a network; the runners of AutoTVM, the auto-scheduler and MetaSchedule
  measure through it.
- :func:`run_python` runs a tuning script in a subprocess and, optionally, stops
  it with a signal (SIGINT as Ctrl-C does, SIGKILL as a crash does) once a
  condition holds, e.g. once its log has a number of lines; it reports the
  processes the script started, so a test can check that none was left behind.
  :func:`run_python_together` runs several at the same time, e.g. two tuning
  processes appending to one log.
- :func:`wait_until` polls a condition until it holds or a deadline passes:
  tests wait for asynchronous events (a device handed back to the tracker, a
  process exiting) with a generous deadline instead of a fixed sleep.
"""
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, TypeVar

import psutil

from tvm import rpc
from tvm.rpc.tracker import Tracker

LOOPBACK = "127.0.0.1"
# Generous on a loaded machine; a condition that holds returns at once.
DEFAULT_DEADLINE = 60.0

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    message: str,
    timeout: float = DEFAULT_DEADLINE,
    interval: float = 0.1,
) -> T:
    """Poll ``condition`` until it returns a true value, at most ``timeout`` seconds.

    Parameters
    ----------
    condition : Callable[[], T]
        Called until it returns a true value.
    message : str
        What did not happen, for the error raised at the deadline.
    timeout : float
        The deadline, in seconds.
    interval : float
        The pause between two calls, in seconds.

    Returns
    -------
    value : T
        The first true value ``condition`` returned.

    Raises
    ------
    AssertionError
        When ``condition`` did not hold within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{message} (waited {timeout:g} s)")
        time.sleep(interval)


class LoopbackDevices:
    """An RPC tracker and RPC servers registered with it under one key.

    Everything listens on the loopback interface; the constructor returns once
    the tracker can hand out every server.

    Parameters
    ----------
    key : str
        The device key the servers register under.
    count : int
        How many servers to start.
    timeout : float
        How long to wait for the servers to register, in seconds.
    """

    def __init__(self, key: str, count: int = 2, timeout: float = DEFAULT_DEADLINE):
        self.key = key
        self.host = LOOPBACK
        self.tracker = Tracker(host=LOOPBACK, port=9190, port_end=9390, silent=True)
        self.servers: List[rpc.Server] = []
        try:
            for _ in range(count):
                self.servers.append(
                    rpc.Server(
                        host=LOOPBACK,
                        port=9390,
                        port_end=9590,
                        key=key,
                        tracker_addr=(LOOPBACK, self.tracker.port),
                        silent=True,
                    )
                )
            self.wait_until_free(count, timeout)
        except BaseException:
            self.terminate()
            raise

    @property
    def port(self) -> int:
        """The tracker's port."""
        return self.tracker.port

    def free(self) -> int:
        """How many servers of the key the tracker can hand out now."""
        summary = rpc.connect_tracker(LOOPBACK, self.port).summary()
        return summary["queue_info"].get(self.key, {}).get("free", 0)

    def wait_until_free(self, count: int, timeout: float = DEFAULT_DEADLINE) -> None:
        """Wait until the tracker can hand out exactly ``count`` servers.

        A runner hands its session back asynchronously, so right after a
        measurement a server may not be free yet.
        """
        wait_until(
            lambda: self.free() == count,
            f"the tracker did not have {count} free servers of key {self.key!r}",
            timeout,
        )

    def lose_one(self, timeout: float = DEFAULT_DEADLINE) -> None:
        """Stop one server, as a device that leaves the network, and wait until the
        tracker hands out only the others."""
        self.servers.pop().terminate()
        self.wait_until_free(len(self.servers), timeout)

    def terminate(self) -> None:
        """Stop the servers and the tracker."""
        for server in self.servers:
            server.terminate()
        self.tracker.terminate()


@contextlib.contextmanager
def loopback_devices(key_prefix: str, count: int = 2) -> Iterator[LoopbackDevices]:
    """:class:`LoopbackDevices` under a key unique to this process, always stopped.

    Parameters
    ----------
    key_prefix : str
        The device key, without the process id appended to it.
    count : int
        How many servers to start.
    """
    devices = LoopbackDevices(f"{key_prefix}-{os.getpid()}", count)
    try:
        yield devices
    finally:
        devices.terminate()


def line_count(path: str) -> int:
    """The number of complete lines of the file at ``path`` (0 when it is missing)."""
    try:
        with open(path, "rb") as stream:
            return stream.read().count(b"\n")
    except FileNotFoundError:
        return 0


@dataclass
class ScriptRun:
    """How a script run by :func:`run_python` ended.

    Attributes
    ----------
    returncode : int
        The script's exit status (negative: the signal that ended it).
    stderr : str
        What it wrote to its standard error.
    descendants : List[psutil.Process]
        Every process it started, seen while it ran.
    """

    returncode: int
    stderr: str
    descendants: List[psutil.Process] = field(default_factory=list)

    def reported(self, label: str) -> int:
        """The number the script wrote to its standard error on a line ``"<label> <number>"``."""
        match = re.search(rf"^{re.escape(label)} (\d+)$", self.stderr, re.MULTILINE)
        if match is None:
            raise AssertionError(f"no line {label!r} <number> in the stderr: {self.stderr[-3000:]}")
        return int(match.group(1))

    def leftovers(self, timeout: float = DEFAULT_DEADLINE) -> List[psutil.Process]:
        """The processes the script started that still run ``timeout`` seconds after it
        ended (their own children included); returns as soon as all are gone."""
        _, alive = psutil.wait_procs(self.descendants, timeout=timeout)
        left = {}
        for process in alive:
            left[process.pid] = process
            try:
                left.update((child.pid, child) for child in process.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        return list(left.values())


def kill_processes(processes: Sequence[psutil.Process], timeout: float = DEFAULT_DEADLINE) -> None:
    """Kill ``processes`` (by their pid, checked against reuse) and wait for them."""
    for process in processes:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=timeout)


def run_python(
    args: Sequence[str],
    stop_signal: Optional[int] = None,
    stop_when: Optional[Callable[[], bool]] = None,
    timeout: float = 600.0,
) -> ScriptRun:
    """Run ``python ARGS`` in a subprocess; optionally stop it with a signal.

    Parameters
    ----------
    args : Sequence[str]
        The script and its arguments.
    stop_signal : Optional[int]
        A signal sent to the script once ``stop_when()`` holds, e.g.
        ``signal.SIGINT`` (as Ctrl-C) or ``signal.SIGKILL`` (as a crash).
    stop_when : Optional[Callable[[], bool]]
        Polled while the script runs (required with ``stop_signal``).
    timeout : float
        The longest the script may run, in seconds; then it is killed and
        AssertionError raised.

    Returns
    -------
    run : ScriptRun
        Its exit status, standard error and the processes it started.
    """
    if (stop_signal is None) != (stop_when is None):
        raise ValueError("give stop_signal and stop_when together")
    if stop_signal == signal.SIGINT and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # An ignored signal stays ignored in the script (a shell without job control
        # ignores SIGINT in the commands it starts in the background).
        raise RuntimeError(
            "SIGINT is ignored in this process, so the script would ignore it too: "
            "run the tests in the foreground or restore SIGINT's default handler"
        )
    descendants = {}
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, *[str(arg) for arg in args]], stdout=subprocess.DEVNULL, stderr=stderr
        )
        try:
            while process.poll() is None:
                try:
                    children = psutil.Process(process.pid).children(recursive=True)
                except psutil.NoSuchProcess:
                    children = []
                for child in children:
                    descendants[child.pid] = child
                if stop_signal is not None and stop_when():
                    # Python may swallow a KeyboardInterrupt raised inside a destructor:
                    # the signal is sent again until the process stops, as a user
                    # presses Ctrl-C again.
                    while process.poll() is None and time.monotonic() < deadline:
                        process.send_signal(stop_signal)
                        try:
                            process.wait(timeout=2)
                        except subprocess.TimeoutExpired:
                            pass
                    break
                if time.monotonic() >= deadline:
                    raise AssertionError(f"{args[0]} did not finish within {timeout:g} s")
                time.sleep(0.05)
            process.wait(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        text = stderr.read().decode("utf-8", "replace")
    return ScriptRun(process.returncode, text, list(descendants.values()))


def run_python_together(
    args_list: Sequence[Sequence[str]],
    timeout: float = 600.0,
    others_after: Optional[Callable[[], bool]] = None,
) -> List[ScriptRun]:
    """Run several scripts with :func:`run_python` at the same time.

    Parameters
    ----------
    args_list : Sequence[Sequence[str]]
        The script and arguments of each run.
    timeout : float
        The longest each may run, in seconds.
    others_after : Optional[Callable[[], bool]]
        When given, the first script starts alone and the others once this
        holds (or the first has ended), e.g. once the first has written a
        record: for what cannot start at the same instant twice.

    Returns
    -------
    runs : List[ScriptRun]
        How each ended, in the order of ``args_list``.
    """
    with ThreadPoolExecutor(len(args_list)) as pool:
        first = pool.submit(run_python, args_list[0], timeout=timeout)
        if others_after is not None:
            wait_until(
                lambda: others_after() or first.done(),
                f"{args_list[0][0]} did not get going",
                timeout,
            )
        others = [pool.submit(run_python, args, timeout=timeout) for args in args_list[1:]]
        return [future.result() for future in [first, *others]]


__all__ = [
    "LOOPBACK",
    "LoopbackDevices",
    "ScriptRun",
    "kill_processes",
    "line_count",
    "loopback_devices",
    "run_python",
    "run_python_together",
    "wait_until",
]
