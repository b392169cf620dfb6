"""SIGINT and SIGTERM in a pipeline run: recorded at once, acted on where it is safe.

Python runs a signal handler in the main thread between two bytecodes,
wherever that thread is. Inside py4j's read of the JVM's answer that is the
worst place to do anything: a handler that calls the JVM (PySpark's own
SIGINT handler calls cancelAllJobs) makes a second call on the same socket
("RuntimeError: reentrant call inside BufferedReader", then
Py4JNetworkError, each logged with its traceback), and one that raises
leaves the connection half read under a call PySpark still cleans up after.

So while the main thread may be inside a call to Spark (`spark_calls()`:
the session's start, the job, its stop) the handler only records the
signal and returns. A watcher thread, woken by the signal itself
(`signal.set_wakeup_fd`: the C-level handler writes the signal's number
whichever thread the kernel gave it to, even while the main thread sits in
a blocking read), runs the stops registered for that moment, on
connections of its own (py4j gives each thread its own): kill the JVM
while it starts, cancel the jobs once it runs. The main thread's call then
returns or fails, and the next `check()` raises Interrupted: one exception,
where the run cleans up. Outside those blocks (before Spark starts, after
it stopped) the handler raises Interrupted itself, as Ctrl-C's
KeyboardInterrupt would.

Once an interruption is recorded, what dying threads and the JVM say is not
shown: log records (py4j's and PySpark's), exceptions ending threads,
"Exception ignored" reports, and the JVM's stderr (session.py registers
its relay's `mute`). The run ends with its own one line.

Only the pipeline command installs this (`Interrupts.install`); without it
every function here is a no-op, and Spark sessions behave as PySpark makes
them (its SIGINT handler included).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lbparse.outputs import Interrupted

__all__ = ["Interrupts", "active", "check", "interrupted", "on_interrupt", "spark_calls"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long the watcher repeats its stops (every ROUND seconds) until the main
# thread has taken the interruption: a job submitted just after a cancel is
# cancelled by the next round.
ROUND = 0.5
ROUNDS = 600
# How long check() waits for a round under way (a cancel to a dying JVM) before
# the main thread goes on to stop Spark itself.
SETTLE = 20.0

_ACTIVE: Interrupts | None = None


class Interrupts:
    """The process's handling of SIGINT and SIGTERM during a pipeline run."""

    def __init__(self) -> None:
        self.hit: int | None = None  # the first signal; later ones change nothing
        self._deferring = 0  # > 0: the main thread may be inside a call to the JVM
        self._raised = False
        self._stops: list[Callable[[], None]] = []  # while deferring: run by the watcher
        self._always: list[Callable[[], None]] = []  # once interrupted, whenever
        self._always_done = False
        self._seen = threading.Event()  # the main thread has taken the interruption
        self._acting = threading.Lock()  # held by the watcher during a round of stops
        self._wakeup: tuple[int, int] | None = None
        self._previous_wakeup = -1
        self._watcher: threading.Thread | None = None
        self._hooks: tuple[Any, Any, Any, Any] = (None, None, None, None)

    # -- setup ---------------------------------------------------------------

    def install(self) -> None:
        """Handlers, the wakeup pipe and its watcher, the quiet hooks. Main thread only."""
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE is not self:
            _ACTIVE.close()  # an earlier run in this process (tests call main())
        if self._wakeup is None:
            read, write = os.pipe()
            os.set_blocking(write, False)  # the C handler must never block on it
            try:
                self._previous_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
            except ValueError:  # not the main thread: the handler alone, as before
                os.close(read)
                os.close(write)
            else:
                self._wakeup = (read, write)
                self._watcher = threading.Thread(
                    target=self._watch, args=(read,), name="lbparse interrupts", daemon=True
                )
                self._watcher.start()
        self._quiet_hooks()
        _ACTIVE = self
        # Last: a signal from now on finds everything else in place.
        for s in SIGNALS:
            signal.signal(s, self._handler)

    def close(self) -> None:
        """The run is over: the wakeup pipe and its watcher go.

        The handlers stay: a signal now, with nothing of Spark left, raises
        Interrupted once.
        """
        global _ACTIVE
        self._seen.set()  # a watcher still repeating its stops ends them
        if self.hit is None:  # nothing to keep quiet: the hooks as they were
            if sys.unraisablehook is self._hooks[0]:
                sys.unraisablehook = self._hooks[1]
            if threading.excepthook is self._hooks[2]:
                threading.excepthook = self._hooks[3]
        if self._wakeup is not None:
            read, write = self._wakeup
            self._wakeup = None
            try:
                current = signal.set_wakeup_fd(self._previous_wakeup)
                if current != write:  # someone set theirs since: it stays
                    signal.set_wakeup_fd(current)
            except ValueError:  # not the main thread
                pass
            os.close(write)  # the watcher reads EOF, closes `read` and ends
            if self._watcher is not None:
                self._watcher.join(timeout=2)  # a daemon: one stuck in a call stays behind
        if _ACTIVE is self:
            _ACTIVE = None

    def reinstall(self) -> None:
        """Our handlers again, should something have replaced them."""
        for s in SIGNALS:
            if signal.getsignal(s) != self._handler:
                signal.signal(s, self._handler)

    def _quiet_hooks(self) -> None:
        unraisable, excepthook = sys.unraisablehook, threading.excepthook

        def quiet_unraisable(u: Any) -> None:
            # Interrupted where Python cannot raise it (a finalizer, a fork hook)
            # is reported, not raised; check() raises it again where it can.
            if not isinstance(u.exc_value, Interrupted) and self.hit is None:
                unraisable(u)

        def quiet_thread(args: Any) -> None:
            # Threads of py4j and PySpark that die with the JVM.
            if self.hit is None:
                excepthook(args)

        sys.unraisablehook = quiet_unraisable
        threading.excepthook = quiet_thread
        self._hooks = (quiet_unraisable, unraisable, quiet_thread, excepthook)

    # -- the signal ----------------------------------------------------------

    def _handler(self, signum: int, _frame: Any) -> None:
        self._record(signum)
        if self._deferring or self._raised:
            return  # the watcher acts; check() raises where the run can stop
        self._raised = True
        self._seen.set()
        raise Interrupted(signum)

    def _record(self, signum: int) -> None:
        if self.hit is None:
            self.hit = signum
            # Every log record from now on is a thread or the JVM dying under
            # the interruption: py4j logs each failed call with its traceback.
            logging.disable(logging.CRITICAL)
            # And PySpark's warnings of the JVM it could not stop cleanly
            # ("Unable to cleanly shutdown Spark JVM process"): the same dying.
            warnings.simplefilter("ignore")

    def _watch(self, fd: int) -> None:
        try:
            while True:  # until close() closes the pipe's other end
                try:
                    data = os.read(fd, 64)
                except OSError:
                    return
                if not data:
                    return
                for signum in data:
                    if signum in SIGNALS:  # a later one finds the work done, or under way
                        self._record(signum)
                        self._act()
        finally:
            os.close(fd)

    def _act(self) -> None:
        """Run the stops, again every ROUND s until the main thread has taken the
        interruption (a job submitted after a cancel is cancelled by the next)."""
        self._always_done = True
        for always in list(self._always):
            _quietly(always)
        for _ in range(ROUNDS):  # bounded: ROUNDS * ROUND s
            with self._acting:
                if self._seen.is_set():
                    return
                for stop in list(self._stops):
                    _quietly(stop)
            if self._seen.wait(ROUND):
                return

    # -- the main thread's side ----------------------------------------------

    def check(self) -> None:
        """Raise Interrupted if a signal came.

        A round of stops under way is first let finish (SETTLE seconds at most),
        so that what the run does next (stop Spark) does not race it.

        Raises:
            Interrupted: A signal came; it carries the signal's number.
        """
        if self.hit is None:
            return
        self._seen.set()
        if self._acting.acquire(timeout=SETTLE):
            self._acting.release()
        self._raised = True
        raise Interrupted(self.hit)

    def taken(self) -> None:
        """The interruption is being handled: a signal from now on raises nothing."""
        self._raised = True
        self._seen.set()

    @contextmanager
    def spark_calls(self, stop: Callable[[], None] | None = None) -> Iterator[None]:
        """A block where the main thread may be inside a call to the JVM.

        In it a signal is only recorded, and `stop` run by the watcher thread;
        the block's code calls check() where it can stop.

        Args:
            stop: What stops the JVM's work of this block (kill it while it
                starts, cancel its jobs), run by the watcher thread, every ROUND
                seconds until the main thread takes the interruption; None: nothing
                to stop.

        Yields:
            Nothing: the block runs inside.

        Raises:
            Interrupted: A signal came before the block (from check()).
        """
        self.check()
        self._deferring += 1
        if stop is not None:
            self._stops.append(stop)
        try:
            yield
        finally:
            if stop is not None:
                self._stops.remove(stop)
            self._deferring -= 1

    def on_interrupt(self, action: Callable[[], None]) -> None:
        """Register `action` to be run as soon as an interruption is recorded.

        Args:
            action: A callable of no arguments, run by the watcher thread (at once,
                if the interruption was acted on already); its exceptions are
                ignored.
        """
        self._always.append(action)
        if self._always_done:  # registered after the watcher ran them: now
            _quietly(action)


def _quietly(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:
        pass


def active() -> Interrupts | None:
    """The Interrupts installed for the run under way.

    Returns:
        The installed Interrupts, or None when none is (outside the pipeline
        command).
    """
    return _ACTIVE


def interrupted() -> int | None:
    """The signal that interrupted the run, if one did.

    Returns:
        The first signal's number (SIGINT or SIGTERM), or None: no signal came,
        or no Interrupts is installed.
    """
    return _ACTIVE.hit if _ACTIVE is not None else None


def check() -> None:
    """Raise Interrupted if the run was interrupted (a no-op without Interrupts).

    Raises:
        Interrupted: A signal came during the run.
    """
    if _ACTIVE is not None:
        _ACTIVE.check()


@contextmanager
def spark_calls(stop: Callable[[], None] | None = None) -> Iterator[None]:
    """A block where the main thread may be inside a call to the JVM.

    A signal is only recorded there (and `stop` run by the watcher thread);
    the block's code calls check() where it can stop. Without Interrupts
    installed it is an empty block.

    Args:
        stop: What stops the JVM's work of this block (kill it while it
            starts, cancel its jobs), run by the watcher thread; None: nothing
            to stop.

    Yields:
        Nothing: the block runs inside.

    Raises:
        Interrupted: At once, if a signal came before the block.
    """
    if _ACTIVE is None:
        yield
        return
    with _ACTIVE.spark_calls(stop):
        yield


def on_interrupt(action: Callable[[], None]) -> None:
    """Run `action` (by the watcher thread) as soon as an interruption is recorded.

    A no-op without Interrupts installed.

    Args:
        action: A callable of no arguments; its exceptions are ignored.
    """
    if _ACTIVE is not None:
        _ACTIVE.on_interrupt(action)
