"""What the tests start, build and check against: importable as `support`
(tests/conftest.py puts tests/ on sys.path; fuzz/ and bench/ do the same).

Real parts it starts
  cluster        a real 3-node Liftbridge v1.9.0 cluster run by
                 shared/liftbridge/run_cluster.sh (`short`, `full`, `short` with
                 the clients' gRPC captured); the fixtures are tests/conftest.py's
  live_cluster   a real 3-node cluster that stays up while tests talk to it
                 (format("liftbridge-streams"), bench/bench_streams, bench_failover)
  net            nats-server's path, free loopback ports, waiting for a server to
                 accept, stopping one (the `nats_server` fixture starts it)
  nats           a test nats-server's decentralized auth (nkeys, JWTs, .creds), and
                 a capture's NATS messages found by tshark, without lbparse
  jvm            every Spark JVM's flags and class archive (the `spark` fixture:
                 tests/spark/conftest.py)
  langs          the other languages' toolchains, building and running each
                 conformance driver (tests/langs/LANG)
  conformance    what a generated parser must say about bytes, judged against lbparse
  cli            lbparse's command line as a real process (`python -P -m lbparse`)
  tools          the build tools of tools/, loaded as modules
  system         another local user, a FIFO nobody writes, a tmpfs mounted (root)
  (headless Chromium is lbparse's own: lbparse.report.browser)

Inputs it builds
  capwriter      capture files (pcap, pcapng; Ethernet, Linux cooked, loopback, raw
                 IP), gRPC calls over cleartext HTTP/2 in them
  damage         damaged captures with known answers
  retransmit     captures whose TCP bytes come twice, the same or not
  storage        segments, indexes and data directories made per the facts, crafted
                 raft.db files, the shared data directories extracted once, lbtruth
  wire           protobuf varints; hashicorp/raft's msgpack and transport bytes
  api_short      the shared capture of the clients' gRPC calls, read once

References and checks
  reference, storage_reference   the generated parsers (envelopes; files on disk)
                 wrapped to answer in lbparse's terms, for differential tests
  native_pass    the Python references of the batch decoder's C passes
  hostile        entry points that must survive any bytes (fuzz/ runs them too)
  report_check   the report's two paths on fuzzer bytes (a fuzz target)
  growth         does a parser's time grow linearly with its input
  examples       how many examples a property test draws (a third in test-fast)
  reading, traffic_tables   what a reading gives, as plain data to compare
  imports        lbparse's import graph, read from the source
  docs           the manual: its text, its fenced blocks, transcripts
  gbuf_check.c   lbparse/_c/lb_gbuf.h compiled alone (tests/columnar/test_kernels.py)

The run itself
  testrun        the run's temporary directory (TMPDIR), what is made once a run
  lanes          `make test`'s waiting lane
  timeline       where a run's minutes go (LBPARSE_TIMELINE=DIR: each test's start,
                 end and CPU by worker, the busy cores each second)
  shared         where the material beside the checkout is (../shared)

Its own checks sit beside it, collected with the suite: test_cluster_support.py,
test_growth_check.py, test_lanes.py, test_timeline.py.
"""
