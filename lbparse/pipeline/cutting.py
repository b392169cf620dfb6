"""The large captures' index pass, run in a process of its own beside Spark's start.

`lbparse pipeline` cuts a capture over `capture_unit_bytes` into ranges
(`lbparse.columnar.sources.cut_captures`): the index pass reads it whole, a
second a gigabyte. Spark's start (the JVM and its gateway, ~4 s) leaves
most of the second core idle, so the pass runs there meanwhile: in a
process, not a thread, since the pass holds the GIL and the session's start
makes hundreds of calls that each need it back (a thread made the start
1.3 s slower, a process made the whole 1.1 s faster: 1 GB, local[2]).

`Cutting(units, options)` starts the process (only when there is a capture
to cut); `.result()` takes its units. Whatever goes wrong with the process
(it cannot start, cannot import lbparse or imports another one, dies,
says something that is not units), `.result()` runs the same pass in this process instead: the same
code, so the same units or the same error, said here. `.close()` (or the
`with` block's end) stops the process if it still runs: an interrupted run
leaves nothing behind.

Run as `python -m lbparse.pipeline.cutting`: reads `{"options": {...},
"units": [unit JSON, ...]}` on stdin (the captures to cut), writes each
one's ranges on stdout, with the lbparse that cut them (its
lbparse/columnar/sources.py): `{"lbparse": PATH, "ranges": [[unit JSON,
...], ...]}`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from types import TracebackType

from lbparse.columnar import sources
from lbparse.columnar.sources import SourceOptions, cut_captures, cuttable
from lbparse.columnar.units import Unit

__all__ = ["Cutting"]

# The most a killed pass is waited for at close().
_STOP_SECONDS = 5.0


class Cutting:
    """`cut_captures(units, options)` in a process of its own, started at once."""

    def __init__(self, units: list[Unit], options: SourceOptions, *, beside: bool = True) -> None:
        """Start the pass, when some unit is a capture to cut.

        Args:
            units: Units planned with cut=False (lbparse.pipeline.input_plan.plan).
            options: The options they were planned with.
            beside: Run it in a process of its own; False: in result(), in
                this process (a session already up has nothing to overlap:
                the process' start would only cost).
        """
        self._units = units
        self._options = options
        self._proc: subprocess.Popen[bytes] | None = None
        # Only the captures to cut go to the process: a small request, written
        # at once (a long one would wait for the process to read it).
        self._todo = [i for i, u in enumerate(units) if cuttable(u, options)]
        if self._todo and beside:
            self._proc = _start([units[i] for i in self._todo], options)

    def result(self) -> list[Unit]:
        """The units, large captures cut; waits for the process.

        Returns:
            What `cut_captures(units, options)` returns.

        Raises:
            OSError: The pass, run here after the process failed, could not
                read a capture (as `cut_captures` raises it).
        """
        proc, self._proc = self._proc, None
        got = _finish(proc, len(self._todo)) if proc is not None else None
        if got is None:
            return cut_captures(self._units, self._options)
        parts = [[u] for u in self._units]
        for i, ranges in zip(self._todo, got):
            parts[i] = ranges
        return [u for part in parts for u in part]

    def close(self) -> None:
        """Stop the process if it still runs (an interrupted run)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait(_STOP_SECONDS)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> Cutting:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def argv() -> list[str]:
    """The pass' command line.

    -P: never the current directory first on sys.path (a checkout's source,
    without its C modules), as Spark's workers run (PYTHONSAFEPATH). The
    lbparse it imports must be this process' (main() says which, _finish
    checks).

    Returns:
        This interpreter, running this module.
    """
    return [sys.executable, "-P", "-m", __name__]


def _start(units: list[Unit], options: SourceOptions) -> subprocess.Popen[bytes] | None:
    request = json.dumps(
        {"options": dataclasses.asdict(options), "units": [u.to_json() for u in units]}
    ).encode()
    try:
        proc = subprocess.Popen(
            argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Its failures are not said: result() runs the pass here instead,
            # which says them (or succeeds, the process' trouble being its own).
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
    try:
        assert proc.stdin is not None
        proc.stdin.write(request)
        proc.stdin.close()
    except OSError:  # it died at once: result() finds out
        pass
    return proc


def _finish(proc: subprocess.Popen[bytes], todo: int) -> list[list[Unit]] | None:
    """Each capture's units, as the process cut them; None when it failed in any way."""
    try:
        assert proc.stdout is not None
        with proc.stdout:  # not communicate(): it would flush the stdin _start closed
            out = proc.stdout.read()
        if proc.wait() != 0:
            return None
        said = json.loads(out)
        if not os.path.samefile(said["lbparse"], sources.__file__):
            return None  # another lbparse's cuts: not this one's to trust
        got = [[Unit.from_json(text) for text in ranges] for ranges in said["ranges"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return got if len(got) == todo else None


def main() -> int:
    """The pass as a process: a request on stdin, the units on stdout.

    Returns:
        The exit status: 0, the units written.
    """
    # Ctrl-C reaches the whole process group: this process ends by the signal,
    # quietly (no KeyboardInterrupt traceback); the pipeline says the one line.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    request = json.loads(sys.stdin.buffer.read())
    options = SourceOptions(**request["options"])
    units = [Unit.from_json(text) for text in request["units"]]
    cut = [[r.to_json() for r in cut_captures([u], options)] for u in units]
    sys.stdout.write(json.dumps({"lbparse": sources.__file__, "ranges": cut}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
