"""The Spark session the pipeline runs in: local by default, or a cluster.

`spark_session(master)` starts Spark in this process: `local[*]` (every
core) unless a master is given (`spark://HOST:PORT`, `local[2]`, ...).
Under `spark-submit` the session spark-submit configured is used as it is
(its `--master`, `--py-files`, ...).

Python workers must run the interpreter that runs the driver (where
lbparse and its pinned dependencies are installed), so PYSPARK_PYTHON is
set to it unless already set; on a loopback or local master Spark is also
told to bind to 127.0.0.1 (SPARK_LOCAL_IP), which keeps it off the
network and quiet about which interface it picked.

A session started here is quiet (`quiet=True`, the default): what the JVM
writes on stderr while it starts (Java's own warnings, Spark's banner) is
held back and shown only if the start fails; from then on log4j says
errors only, and Spark draws no progress bar of its own (the pipeline has
its progress line, and `-q`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

from lbparse.errors import InputError
from lbparse.extras import need
from lbparse.outputs import Interrupted
from lbparse.pipeline import class_archive, interrupts
from lbparse.pipeline.preflight import start_error
from lbparse.scratch import write_private

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_CONF",
    "LOCAL_CONF",
    "LOCAL_JVM_OPTIONS",
    "TEST_CONF",
    "driver_java_options",
    "run_session",
    "spark_session",
    "under_spark_submit",
    "worker_daemon_conf",
]

# Settings the pipeline needs wherever it runs (runtime SQL settings).
DEFAULT_CONF: dict[str, str] = {
    # A partitioned write sorts each task's rows by partition unless it may
    # keep this many files open at once; there are ~20 MsgType values.
    "spark.sql.maxConcurrentOutputFileWriters": "64",
    "spark.sql.session.timeZone": "UTC",
}
# The local sessions lbparse starts have no web UI (a caller's conf may ask for
# it): a local run's progress is the command's own line, and the UI's server
# (Jetty, its listeners, a port from 4040 up) was ~0.5 s of each run's start
# (3.56 -> 3.08 s to a started session, median of 3, this 2-core machine).
LOCAL_CONF: dict[str, str] = {"spark.ui.enabled": "false"}
# Spark's Python daemon as lbparse runs it in the local sessions it starts.
WORKER_DAEMON = ("spark.python.daemon.module", "lbparse.pipeline.worker_daemon")
# Small and quiet, for tests and the demo.
TEST_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
}
# The JVM of a local master: Spark's whole "cluster", and it mostly waits
# while the pipeline's Python workers read, decode and write. The JIT's second
# tier and the parallel collector only cost there (their compilations and
# threads are CPU of the start): the first tier and the serial collector.
# Measured with bench/bench_big.py's fresh process, 1 GB of real traffic on
# local[2]: 22.5-24.2 s -> 20.2-20.8 s, the job's own time no longer; a 2 MB
# capture's run 11.6 -> 10.5 s. A caller's spark.driver.extraJavaOptions
# replaces these (and the quiet start's log4j file).
LOCAL_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Settings of a quiet start, before the caller's (which may set them back).
# Spark draws a progress bar on stderr in a shell, and PySpark's session is
# a shell to it ("pyspark-shell").
QUIET_START_CONF: dict[str, str] = {"spark.ui.showConsoleProgress": "false"}
# Spark's startup chatter (log4j's default is INFO and WARN lines about
# native libraries): errors of our own run still show.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark's level for a shell (PySpark's session is one to it): WARN unless
# set here, and when it is not the root's, Spark prints "Setting default
# log level to WARN" and how to change it, on every start.
logger.shell.name = org.apache.spark.repl.Main
logger.shell.level = error
# The JVM's shutdown after an interruption (Ctrl-C: issue #25, one line and no
# JVM trace) may interrupt the removal of Spark's scratch directories, which
# these two log as an ERROR with a stack trace; a scratch directory left in
# the temp directory is all it means.
logger.blocks.name = org.apache.spark.storage.DiskBlockManager
logger.blocks.level = fatal
logger.hooks.name = org.apache.spark.util.ShutdownHookManager
logger.hooks.level = fatal
# And the session's stop, under way as the signal reaches the JVM too (a
# SIGTERM to the group at the swap, CI 2026-11-27): the shuffle tracker's
# goodbye is interrupted ("Error communicating with MapOutputTracker",
# InterruptedException). The pipeline's job has no shuffle to lose.
logger.mapoutput.name = org.apache.spark.MapOutputTrackerMaster
logger.mapoutput.level = fatal
"""


def under_spark_submit() -> bool:
    """Whether spark-submit started this Python (it hands over its JVM gateway).

    Returns:
        True when PYSPARK_GATEWAY_PORT is set.
    """
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _loopback(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


def _log4j_file() -> str:
    """Our log4j2 configuration, in a file made fresh in this process's
    private scratch directory: at a fixed name in the temp directory (as
    it was), another local user could plant one first and have the JVM log
    where they chose (issue #19)."""
    return write_private("log4j2.properties", _LOG4J)


def driver_java_options(master: str, quiet: bool) -> str:
    """The driver JVM's options of a session lbparse starts (before the caller's conf).

    Args:
        master: The session's master URL.
        quiet: Whether the start is quiet (its log4j file, errors only).

    Returns:
        LOCAL_JVM_OPTIONS on a local master, then the quiet start's log4j
        file; "" when neither applies.
    """
    options = [LOCAL_JVM_OPTIONS] if master.startswith("local") else []
    if quiet:
        options.append(f"-Dlog4j2.configurationFile=file:{_log4j_file()}")
    return " ".join(options)


def worker_daemon_conf(master: str) -> dict[str, str]:
    """The Python daemon setting of a new session (WORKER_DAEMON), or none.

    The Python workers import the installed pyspark, not Spark's zip of it
    (compiled anew in each process): a session's first job ~1.3 s shorter
    (worker_daemon.py). Local masters only, whose workers run this
    interpreter, which has lbparse: a cluster's executors may have it only
    as --py-files, which a daemon does not see; another PYSPARK_PYTHON may
    not have it at all.

    Args:
        master: The new session's master URL.

    Returns:
        The settings to add: WORKER_DAEMON's, or nothing.
    """
    if master.startswith("local") and os.environ.get("PYSPARK_PYTHON") == sys.executable:
        key, module = WORKER_DAEMON
        return {key: module}
    return {}


def _session_class() -> type[SparkSession]:
    # Spark is the spark extra's; the rest of this module is not (the command
    # line checks its options with under_spark_submit before Spark starts).
    return cast("type[SparkSession]", need("pyspark.sql").SparkSession)


def session_active() -> bool:
    """Whether this process has an active SparkSession (its JVM already up).

    Returns:
        True when pyspark is imported and a session is active.
    """
    if "pyspark.sql" not in sys.modules:  # no session without it: nothing imported here
        return False
    return _session_class().getActiveSession() is not None


def spark_session(
    master: str | None = None,
    *,
    app_name: str = "lbparse pipeline",
    conf: Mapping[str, str] | None = None,
    quiet: bool = True,
) -> SparkSession:
    """The SparkSession to run in: the active one (spark-submit's, a test's), or a new one.

    A new one runs the driver's interpreter in the workers (PYSPARK_PYTHON),
    binds to 127.0.0.1 on a local or loopback master, and gets DEFAULT_CONF;
    so does an active one. A new local one has no web UI (LOCAL_CONF; `conf`
    may set spark.ui.enabled) and maps Spark's classes from lbparse's class
    archive, or writes it as its JVM exits (class_archive.py).

    Args:
        master: The Spark master URL of a new session; None: local[*] (every
            core). Not used when a session is active or under spark-submit.
        app_name: The application's name, as Spark's UI shows it.
        conf: Spark settings for a new session, over the quiet start's.
        quiet: Hold the JVM's stderr back while it starts (shown if the start
            fails) and keep log4j to errors; False: Spark's own output.

    Returns:
        The session, its DEFAULT_CONF set.

    Raises:
        InputError: Spark did not start (one line: the JVM's reason).
        Interrupted: A signal stopped the start (under the pipeline's interrupt
            handling); the JVM launched is killed.
    """
    session = _session_class()
    active = session.getActiveSession()
    if active is not None:
        spark = active
    elif under_spark_submit():
        spark = session.builder.appName(app_name).getOrCreate()
    else:
        master = master or "local[*]"
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if _loopback(master):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The Python workers run `python -m pyspark.daemon` in the driver's
        # directory, which -m puts first on sys.path: from a checkout they
        # imported its source, not the lbparse installed (whose C capture
        # loop cut the inputs). PYTHONSAFEPATH keeps the directory out.
        builder = (
            session.builder.master(master)
            .appName(app_name)
            .config("spark.executorEnv.PYTHONSAFEPATH", "1")
        )
        java = driver_java_options(master, quiet)
        local = master.startswith("local")
        if local:
            # Spark's classes mapped from last time's archive (or archived at
            # this JVM's exit): a local run's start ~4 s shorter.
            java = f"{java} {class_archive.java_options(LOCAL_JVM_OPTIONS)}".strip()
        for k, v in worker_daemon_conf(master).items():
            builder = builder.config(k, v)
        if java:
            builder = builder.config("spark.driver.extraJavaOptions", java)
        if quiet:
            for k, v in QUIET_START_CONF.items():
                builder = builder.config(k, v)
        settings = {**(LOCAL_CONF if local else {}), **(conf or {})}
        for k, v in settings.items():
            builder = builder.config(k, v)
        try:
            spark = _started(builder, HeldStderr() if quiet else None)
        except Exception as exc:
            raise InputError(
                "bad_option", f"Spark did not start (--master {master}): {start_error(exc)}"
            ) from None
    for k, v in DEFAULT_CONF.items():
        spark.conf.set(k, v)
    return spark


class HeldStderr:
    """The JVM's stderr, through a pipe: held back while Spark starts, written
    on (to this process's stderr) once it has started.

    The JVM says things at start that no log4j setting reaches: Java's own
    "WARNING: Using incubator modules" (Spark adds the module), and lines
    printed before log4j is configured. A start that fails shows them all:
    the JVM's reason (a heap too small, a bad option) is among them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: list[bytes] | None = []  # None: started, what comes goes through
        self.muted = False
        self.relays: list[tuple[Any, threading.Thread]] = []

    def launch(self, popen: Any, *args: Any, **kwargs: Any) -> Any:
        """popen(*args, **kwargs) with its stderr on a pipe of ours, relayed until
        the JVM closes it. The pipe is read with os.read, not through a file
        object: a daemon thread blocked inside a buffered reader can abort
        the interpreter's exit (_enter_buffered_busy)."""
        if "stderr" in kwargs:  # the caller's choice
            return popen(*args, **kwargs)
        read, write = os.pipe()
        try:
            proc = popen(*args, **kwargs, stderr=write)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the JVM has its copy: EOF once it exits
        relay = threading.Thread(target=self._relay, args=(read,), name="JVM stderr", daemon=True)
        relay.start()
        self.relays.append((proc, relay))
        return proc

    def _relay(self, fd: int) -> None:
        try:
            while True:
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    return
                if not chunk:
                    return
                with self.lock:
                    if self.muted:
                        continue  # read on: a JVM writing to a full pipe would block
                    if self.held is not None:
                        self.held.append(chunk)
                        continue
                _write_stderr(chunk)
        finally:
            os.close(fd)

    def mute(self) -> None:
        """Nothing more of the JVM's (and its Python workers') stderr, held or
        to come: after an interruption, what they say as they die is noise."""
        with self.lock:
            self.muted, self.held = True, None

    def release(self, show: bool) -> None:
        """The start is over: from now on lines go through; `show`: the held ones too."""
        if show:  # a JVM that exited: its last words first, then the caller's line
            for proc, relay in self.relays:
                if proc.poll() is not None:
                    relay.join(timeout=2)
        with self.lock:
            held, self.held = self.held or [], None
        if show and not self.muted:
            for chunk in held:
                _write_stderr(chunk)


def _write_stderr(data: bytes) -> None:
    # fd 2 itself, as the JVM wrote before: not sys.stderr, which a caller
    # (pytest, -o) may have swapped for its own object.
    try:
        os.write(2, data)
    except OSError:  # stderr closed: nothing to tell it
        pass


def _started(builder: Any, stderr: HeldStderr | None = None) -> SparkSession:
    """builder.getOrCreate(); the JVM it launched is killed if a signal stops it.

    PySpark starts the JVM ignoring SIGINT, and the JVM exits with this
    process only once its gateway is up (it watches its stdin from then on).
    Ctrl-C before that interrupted PySpark's wait, which removed the file the
    JVM was to write its port to: the JVM lived on, alone, its stack trace on
    stderr (found: 7 left running after as many interrupted starts). So the
    process PySpark launches (spark-submit, which execs the JVM) is noted as
    it is made, and killed if a signal stops getOrCreate, and PySpark forgets
    its gateway, so that a later start in this process launches a new one.
    (A start that fails on its own is PySpark's to clean up, as before.)

    Under the pipeline's interrupt handling (interrupts.py) the signal does
    not raise inside the start, half of which is calls to the JVM: the
    watcher thread kills the JVM, the start fails for it, and that failure is
    the interruption. PySpark's own SIGINT handler, which SparkContext
    installs as it starts and which calls the JVM from inside whatever call
    the main thread is in, is not installed then."""
    gateway: Any = need("pyspark.java_gateway")  # PySpark's launcher of the JVM
    context: Any = need("pyspark").SparkContext
    launch = gateway.Popen
    made: list[Any] = []

    def noted(*args: Any, **kwargs: Any) -> Any:
        made.append(
            launch(*args, **kwargs) if stderr is None else stderr.launch(launch, *args, **kwargs)
        )
        return made[-1]

    def kill_launched() -> None:  # the interrupts' watcher thread, on a signal
        for proc in list(made):
            if proc.poll() is None:
                proc.kill()

    gateway.Popen = noted
    failed = False  # on its own: the JVM's held words are its reason
    if stderr is not None:
        interrupts.on_interrupt(stderr.mute)
    try:
        with interrupts.spark_calls(kill_launched), _handlers_kept(context):
            return cast("SparkSession", builder.getOrCreate())
    except BaseException as exc:
        signum = interrupts.interrupted()
        if not isinstance(exc, Exception):  # KeyboardInterrupt: the signal handlers'
            _kill(made, context)
        elif signum is not None:  # the start failed as its JVM was killed for a signal
            _kill(made, context)
            raise Interrupted(signum) from None
        else:
            failed = True
        raise
    finally:
        gateway.Popen = launch
        if stderr is not None:
            # An interruption is the pipeline's one line, without the JVM's words.
            stderr.release(show=failed)


class _KeepHandlers:
    """The `signal` module as PySpark's SparkContext sees it while the pipeline
    starts it: signal.signal() leaves the handler as it is."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def signal(self, signum: int, _handler: Any) -> Any:
        return self._real.getsignal(signum)


@contextmanager
def _handlers_kept(context: Any) -> Iterator[None]:
    """SparkContext starts without installing its SIGINT handler, under the
    pipeline's interrupt handling only (other callers keep PySpark's)."""
    module = sys.modules.get(context.__module__)
    real = getattr(module, "signal", None)
    if interrupts.active() is None or module is None or real is None:
        yield
        return
    setattr(module, "signal", _KeepHandlers(real))  # noqa: B010 (mypy: a module attribute)
    try:
        yield
    finally:
        setattr(module, "signal", real)  # noqa: B010


def _kill(launched: list[Any], context: Any) -> None:
    """The JVMs launched, killed; PySpark's gateway forgotten if it is theirs."""
    for proc in launched:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if getattr(context._gateway, "proc", None) in launched:
        context._gateway = context._jvm = None


@contextmanager
def run_session(
    master: str | None = None, *, conf: Mapping[str, str] | None = None
) -> Iterator[SparkSession]:
    """A session for one run, as a context manager.

    Stopped at the end if it was started here, left running if it was
    already there (spark-submit's, a caller's, a test's).

    Args:
        master: The Spark master URL of a new session (None: local[*]).
        conf: Spark settings for a new session.

    Yields:
        The session.

    Raises:
        ValueError: Spark did not start.
    """
    owned = not session_active() and not under_spark_submit()
    spark = spark_session(master, conf=conf)
    try:
        yield spark
    except BaseException:
        if owned:
            try:
                _stop(spark)
            except Exception:
                pass  # what stopped the run is what to report
        raise
    if owned:
        _stop(spark)


def _stop(spark: SparkSession) -> None:
    """Stop `spark` without waiting on PySpark's accumulator server.

    SparkContext.stop() ends by shutting that server down, and the shutdown
    waits for the server's request handler to poll the JVM's connection
    again: up to a second (the poll's timeout) at the end of every run, the
    JVM already stopped. The JVM stops here as before; the server is shut
    down on a daemon thread of its own, so a command exits at once and a
    longer-lived process sees the server gone within the second.
    """
    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    # SparkContext.stop() shuts down (and waits on) the server it finds here
    context._accumulatorServer = None  # type: ignore[assignment]
    try:
        spark.stop()
    finally:
        if server is not None:
            threading.Thread(
                target=server.shutdown, name="lbparse-accumulator-server-stop", daemon=True
            ).start()
