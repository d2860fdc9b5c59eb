#!/usr/bin/env python3
"""Interleaved A/B of two Sluice configurations on one Redis (driven by bench/ab).

This machine's speed drifts by tens of percent within minutes, so two rows of bench/run measured
a minute apart cannot show a 5-10% difference. This runs Sluice A and Sluice B side by side on
one redis-server (loopback, free ports, no persistence) and measures them in turns, A B B A A B
B A ..., so that both see the same drift, then prints every round and the medians.

  bench/ab [--a="FLAGS"] [--b="FLAGS"] [--rounds=4] [--duration=5] [--rate=0]
           [--concurrency=32] [--domain=bench_tb] [--descriptors=1] [--keyspace=100000]

--a / --b: extra sluice flags of each side (default: none vs --redis_max_batch=1). --rate 0 is a
closed loop at --concurrency (saturation); otherwise an open loop at that many requests/s.
Per round: requests/s, Sluice CPU per request (utime+stime from /proc), Redis EVALSHA usec
and redis-server CPU per decision (INFO commandstats, /proc), p99, and backend failures (the
decisions answered by --failure_mode, from /metrics). Only the standard library is used.
"""

import argparse
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          check=True).stdout


def evalsha_usec(port):
    for line in redis_cli(port, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            fields = dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))
            return float(fields["usec"])
    return 0.0


def backend_failures(http_port):
    text = urllib.request.urlopen(f"http://{HOST}:{http_port}/metrics", timeout=5).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("sluice_backend_failures_total"))


def wait_ready(http_port, proc, deadline_s=15):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if urllib.request.urlopen(f"http://{HOST}:{http_port}/readyz", timeout=1).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit("bench/ab: sluice did not become ready")


def main():
    p = argparse.ArgumentParser(prog="bench/ab", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.environ.get("BUILD_DIR", "build"))
    p.add_argument("--a", default="", help="extra sluice flags of side A")
    p.add_argument("--b", default="--redis_max_batch=1", help="extra sluice flags of side B")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--duration", type=float, default=5)
    p.add_argument("--rate", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--domain", default="bench_tb")
    p.add_argument("--descriptors", type=int, default=1)
    p.add_argument("--keyspace", type=int, default=100000)
    opts = p.parse_args()
    build_bin = os.path.join(os.path.abspath(opts.build_dir), "bin")

    children = []
    try:
        redis_port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", HOST,
                                  "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL)
        children.append(redis)
        sides = {}
        for name, flags in (("A", opts.a), ("B", opts.b)):
            grpc_port, http_port = free_port(), free_port()
            proc = subprocess.Popen(
                [os.path.join(build_bin, "sluice"), f"--config={REPO}/bench/config",
                 "--backend=redis", f"--redis_addresses={HOST}:{redis_port}",
                 f"--grpc_address={HOST}:{grpc_port}", f"--http_address={HOST}:{http_port}",
                 "--log_level=error", "--config_poll_interval=0", *shlex.split(flags)])
            children.append(proc)
            sides[name] = (proc, grpc_port, http_port, flags)
        for proc, _, http_port, _ in sides.values():
            wait_ready(http_port, proc)

        results = {"A": [], "B": []}
        for round_index in range(opts.rounds):
            for name in ("A", "B") if round_index % 2 == 0 else ("B", "A"):
                proc, grpc_port, http_port, _ = sides[name]
                redis_cli(redis_port, "CONFIG", "RESETSTAT")
                sluice0, redis0 = cpu_seconds(proc.pid), cpu_seconds(redis.pid)
                failures0 = backend_failures(http_port)
                argv = [os.path.join(build_bin, "sluice-bench"), f"--server={HOST}:{grpc_port}",
                        f"--duration={opts.duration}", f"--domain={opts.domain}", "--key=key",
                        f"--keyspace={opts.keyspace}", f"--descriptors={opts.descriptors}",
                        "--json"]
                argv += ([f"--rate={opts.rate}"] if opts.rate > 0 else
                         ["--rate=0", f"--concurrency={opts.concurrency}"])
                out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
                report = json.loads(out[out.index("{"):out.rindex("}") + 1])
                requests = max(1, report["requests"])
                decisions = max(1, report["decisions"])
                results[name].append({
                    "rps": report["rps"],
                    "sluice_cpu_us_per_request":
                        (cpu_seconds(proc.pid) - sluice0) * 1e6 / requests,
                    "evalsha_us_per_decision": evalsha_usec(redis_port) / decisions,
                    "redis_cpu_us_per_decision":
                        (cpu_seconds(redis.pid) - redis0) * 1e6 / decisions,
                    "p99_ms": report["latency_ms"]["p99"],
                    "failures": backend_failures(http_port) - failures0,
                })
    finally:
        for child in reversed(children):
            child.terminate()
        for child in children:
            child.wait()

    columns = ["rps", "sluice_cpu_us_per_request", "evalsha_us_per_decision",
               "redis_cpu_us_per_decision", "p99_ms", "failures"]
    load = (f"closed loop at concurrency {opts.concurrency}" if opts.rate <= 0 else
            f"open loop at {opts.rate}/s")
    print(f"bench/ab: {opts.rounds} rounds of {opts.duration:g} s, {load}, domain {opts.domain}, "
          f"{opts.descriptors} descriptor(s), {opts.keyspace} keys")
    print("side  round  " + "  ".join(f"{c:>26}" for c in columns))
    for name in ("A", "B"):
        for i, r in enumerate(results[name]):
            print(f"{name:<4}  {i + 1:>5}  " + "  ".join(f"{r[c]:>26.2f}" for c in columns))
        medians = [statistics.median(r[c] for r in results[name]) for c in columns]
        print(f"{name:<4}  {'med.':>5}  " + "  ".join(f"{m:>26.2f}" for m in medians)
              + f"   flags: {sides[name][3] or '(none)'}")


if __name__ == "__main__":
    main()
