"""The JVM flags of every Spark JVM the tests start, and its class archive.

A test's JVM lives seconds on tiny inputs, and most of its CPU goes to
starting: loading and verifying Spark's ~15,000 classes, compiling them.
Two things cut that, both measured on a local session that counts a
1,000-row range (JVM CPU-s, three runs each, 2 cores):

- `FLAGS`: the JIT's first tier only and the serial collector (C2's
  compilations and the parallel collector's threads only cost in a JVM of
  seconds): a pipeline CLI run, 23 CPU-s to 15.
- a class-data-sharing archive (JDK AppCDS) made once a run by
  `ArchiveJob`, from a JVM that ran a small lbparse pipeline: the JVMs
  after it map Spark's classes parsed and verified, 13.7 CPU-s to 6.9.

Both go through SPARK_SUBMIT_OPTS, which Spark's launcher puts on the
command line of the JVM it starts (a session's, the CLI's, spark-submit's
driver), and not through a configuration directory: Spark puts that on
the class path, and the JDK archives no class path holding a non-empty
directory. Not JDK_JAVA_OPTIONS either: the JVM says "Picked up" on
stderr, which the CLI's tests read. A JVM whose archive is not there yet
(or whose class path differs) runs as without it, silently
(`-Xlog:cds*=off`: no warning on a CLI's stdout). A standalone cluster's
master, worker and executors are started by Spark, not spark-submit:
test_cluster hands them the same options.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from lbparse.pipeline.session import LOCAL_JVM_OPTIONS
from support import testrun

# java.io.tmpdir: the run's temporary directory (support/testrun.py), where a
# JVM a test kills leaves its Spark directories (Spark's local directory is
# java.io.tmpdir unless set). Left out for a path the shell-split options
# could not carry.
# The flags are lbparse's own for a local session's JVM (LOCAL_JVM_OPTIONS):
# here every JVM of the suite gets them, a standalone cluster's too.
FLAGS = LOCAL_JVM_OPTIONS + (
    "" if any(c.isspace() for c in testrun.PATH) else f" -Djava.io.tmpdir={testrun.PATH}"
)
# Spark settings as system properties (SparkConf reads every `spark.*` one):
# no web UI in a driver, whoever starts it (a CLI run, a manual's example, a
# spark-submit): its Jetty server is ~1.3 of a pipeline CLI run's ~11 CPU-s,
# and no test looks at it.
DRIVER = "-Dspark.ui.enabled=false"
QUIET = "-Xlog:cds*=off"
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "lbparse" / "examples" / "sample.pcap"
TIMEOUT = 300.0

# What the archiving JVM runs: lbparse's pipeline on the bundled sample
# (Parquet out, the Python workers, the summary), then what the tests do
# with such output in a session of their own: Spark's Parquet reader, a
# join and an aggregation (Janino's generated code), toPandas and toArrow,
# the liftbridge data source (batch, a narrow table, a stream) and
# from_envelope. So the classes a test's JVM loads are mostly in the
# archive: with the pipeline alone, a session reading the manual's data
# source example loaded 10,300 classes besides the archive's 14,100 (the
# Parquet reader's jars, Janino), and took ~2 CPU-s more of its ~32.
_WORKLOAD = """\
import os, shutil, sys
from lbparse.cli import main
sample, out = sys.argv[1], sys.argv[2]
status = main(["pipeline", sample, "--out", out, "-q"])
from pyspark.sql import SparkSession, functions as F
import lbparse.spark
spark = SparkSession.builder.getOrCreate()
lbparse.spark.register(spark)
msgs = spark.read.parquet(os.path.join(out, "messages"))
acks = spark.read.parquet(os.path.join(out, "proto_Ack"))
msgs.join(acks, ["source", "position"], "left").groupBy("msg_type_name").count().toPandas()
msgs.select(F.struct("source", "position").alias("k")).distinct().toArrow()
src = spark.read.format("liftbridge").load(sample)
src.where("payload is not null").select(lbparse.spark.from_envelope("payload").alias("e")) \\
    .select("e.msg_type_name").collect()
spark.read.format("liftbridge").option("table", "messages").load(sample).count()
incoming = os.path.join(out, "incoming")
os.makedirs(incoming)
shutil.copy(sample, incoming)
query = (spark.readStream.format("liftbridge").options(minFileAge="0").load(incoming)
         .writeStream.format("parquet").option("checkpointLocation", os.path.join(out, "chk"))
         .start(os.path.join(out, "stream")))
query.processAllAvailable()
query.stop()
spark.stop()
sys.exit(status)
"""


def options(archive: Path | None) -> str:
    """SPARK_SUBMIT_OPTS for the tests' JVMs: the flags, and the archive
    if one is (or will be) at `archive`."""
    if archive is None:
        return f"{FLAGS} {DRIVER}"
    return f"{FLAGS} {DRIVER} -XX:SharedArchiveFile={archive} {QUIET}"


class ArchiveJob:
    """The JVM that writes the class archive at `archive` (whole or not at all:
    a JVM starting meanwhile finds it absent), one spark-submit of the workload
    in `work`. spark-submit runs the JVM itself, so its exit (after the archive
    is written) is the end of `wait`; `stop` ends it early, with the Python
    process it started (its own process group)."""

    def __init__(self, archive: Path, work: Path) -> None:
        import pyspark  # here: a test run without Spark imports none of it

        work.mkdir(parents=True, exist_ok=True)
        script, self.partial = work / "workload.py", work / f"{archive.name}.partial"
        self.archive = archive
        script.write_text(_WORKLOAD)
        env = dict(
            os.environ,
            PYSPARK_PYTHON=sys.executable,
            PYSPARK_DRIVER_PYTHON=sys.executable,
            SPARK_SUBMIT_OPTS=f"{FLAGS} {DRIVER} -XX:ArchiveClassesAtExit={self.partial} {QUIET}",
        )
        spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        with open(work / "archive.log", "wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(spark_submit),
                    "--master",
                    "local[2]",
                    str(script),
                    str(SAMPLE),
                    str(work / "out"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=work,
                start_new_session=True,
            )

    def wait(self) -> bool:
        """True when the archive is there, within TIMEOUT."""
        try:
            code = self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop()
            return False
        if code != 0 or not self.partial.exists():
            return False
        self.partial.rename(self.archive)
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
