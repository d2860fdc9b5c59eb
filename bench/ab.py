#!/usr/bin/env python3
"""Interleaved A/B of two Sluice configurations on one Redis (driven by bench/ab).

This machine's speed drifts by tens of percent within minutes, so two rows of bench/run measured
a minute apart cannot show a 5-10% difference. This runs Sluice A and Sluice B side by side on
one redis-server (loopback, free ports, no persistence) and measures them in turns, A B B A A B
B A ..., so that both see the same drift, then prints every round and the medians.

  bench/ab [--a="FLAGS"] [--b="FLAGS"] [--rounds=4] [--duration=5] [--rate=0]
           [--concurrency=32] [--domain=bench_tb] [--descriptors=1] [--keyspace=100000]

--a / --b: extra sluice flags of each side (default: none vs --redis_max_batch=1).
--b-build-dir: side B runs the sluice of another build (e.g. of an earlier commit, built with
BUILD_DIR=... scripts/build sluice in a git worktree), to compare two versions of the code. --rate 0 is a
closed loop at --concurrency (saturation); otherwise an open loop at that many requests/s.
Each round is one sluice-bench run measured as bench/run measures a row's run (bench/run.py's
run_bench: the measured interval only, after Redis has gone idle): requests/s, Sluice CPU per
request and its voluntary context switches per request (bench/run.py's proc_threads), Redis
usec of Sluice's commands and redis-server CPU per decision, p99, and the
decisions answered by --failure_mode. Only the standard library is used.
"""

import argparse
import os
import shlex
import signal
import statistics
import tempfile

# bench/run.py's processes, Redis client and measurement (one sluice-bench run, with the server's
# and Redis' numbers over the measured interval).
import run as bench

COLUMNS = [
    ("rps", "req/s", lambda r: r["rps"]),
    ("sluice", "Sluice CPU us/req", lambda r: r["server_cpu_us_per_request"]),
    ("switches", "Sluice switches/req",
     lambda r: r["server_switches_per_request"]["voluntary"]),
    ("redis_us", "Redis us/dec", lambda r: r["redis"]["usec_per_decision"]),
    ("redis_cpu", "Redis CPU us/dec", lambda r: r["redis"]["cpu_us_per_decision"]),
    ("p99", "p99 ms", lambda r: r["latency_ms"]["p99"]),
    ("failures", "failures", lambda r: r.get("backend_failures") or 0),
]


def main():
    p = argparse.ArgumentParser(prog="bench/ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(bench.REPO, "build"))
    p.add_argument("--a", default="", help="extra sluice flags of side A")
    p.add_argument("--b", default="--redis_max_batch=1", help="extra sluice flags of side B")
    p.add_argument("--b-build-dir", default=None,
                   help="build directory of side B's sluice (default: --build-dir)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--warmup", type=float, default=1)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--channels", type=int, default=4, help="gRPC channels of sluice-bench")
    p.add_argument("--domain", default="bench_tb")
    p.add_argument("--descriptors", type=int, default=1)
    p.add_argument("--keyspace", type=int, default=100000)
    p.add_argument("--tls", action="store_true",
                   help="Redis also serves TLS (a CA and certificate made in the work directory); "
                        "{tls_port} and {tls_dir} in --a/--b are replaced, e.g. --b=\"--redis_tls "
                        "--redis_tls_ca={tls_dir}/ca.crt --redis_addresses=127.0.0.1:{tls_port}\"")
    opts = p.parse_args()
    build_bin = os.path.join(os.path.abspath(opts.build_dir), "bin")
    sluice_bin = {"A": build_bin,
                  "B": os.path.join(os.path.abspath(opts.b_build_dir or opts.build_dir), "bin")}
    workload = dict(domain=opts.domain, keyspace=opts.keyspace, descriptors=opts.descriptors)
    # Open loop: as many calls in flight as bench/run allows its open-loop runs.
    concurrency = opts.concurrency if opts.rate <= 0 else 1000

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_sigterm)
    workdir = tempfile.mkdtemp(prefix="sluice-ab.")
    children = bench.Children(os.path.join(workdir, "pids"), workdir)
    results = {"A": [], "B": []}
    flags = {"A": opts.a, "B": opts.b}
    try:
        tls_port = tls_dir = None
        if opts.tls:
            tls_port, tls_dir = bench.free_port(), bench.make_tls_files(workdir)
            flags = {name: f.replace("{tls_port}", str(tls_port)).replace("{tls_dir}", tls_dir)
                     for name, f in flags.items()}
        redis_proc, redis_port, redis = bench.start_redis(children, workdir, tls_port, tls_dir)
        targets = {name: bench.start_sluice(children, sluice_bin[name], "redis", redis_port, redis,
                                            redis_proc.pid, shlex.split(flags[name]))
                   for name in ("A", "B")}
        for round_index in range(opts.rounds):
            for name in ("A", "B") if round_index % 2 == 0 else ("B", "A"):
                result = bench.run_bench(children, build_bin, targets[name], workload, opts.rate,
                                         concurrency, opts)
                results[name].append([get(result) for _, _, get in COLUMNS])
        redis.close()
    finally:
        children.stop_all()

    load = (f"closed loop at concurrency {opts.concurrency}" if opts.rate <= 0 else
            f"open loop at {opts.rate}/s")
    print(f"bench/ab: {opts.rounds} rounds of {opts.duration:g} s, {load}, domain {opts.domain}, "
          f"{opts.descriptors} descriptor(s), {opts.keyspace} keys")
    print("side  round  " + "  ".join(f"{title:>17}" for _, title, _ in COLUMNS))
    for name in ("A", "B"):
        for i, row in enumerate(results[name]):
            print(f"{name:<4}  {i + 1:>5}  " + "  ".join(f"{v:>17.2f}" for v in row))
        medians = [statistics.median(row[c] for row in results[name]) for c in range(len(COLUMNS))]
        print(f"{name:<4}  {'med.':>5}  " + "  ".join(f"{m:>17.2f}" for m in medians)
              + f"   flags: {flags[name] or '(none)'}  sluice: {sluice_bin[name]}")


if __name__ == "__main__":
    main()
