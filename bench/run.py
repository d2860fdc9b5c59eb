#!/usr/bin/env python3
"""Sluice's benchmark table, measured in one run on loopback (driven by bench/run).

Starts its own redis-server (free port, no persistence), sluice-floor (gRPC alone) and Sluice
(memory and Redis backends, bench/config), drives each with sluice-bench, and prints one table:

  rows     floor; memory token bucket; Redis token bucket; the same with --redis_max_batch=1
           (no lanes: each request's checks on their own); Redis fixed window; Redis surge (most
           requests over limit); Redis 5 descriptors per request; Redis alone (redis-benchmark
           EVALSHA of the token-bucket script, pipelined)
  columns  saturation (closed loop): requests/s, decisions/s, p50, p99, server CPU per request;
           a fixed open-loop rate (--rate): server CPU per request; open loop at half the
           saturation throughput: p99; Redis time and commands per decision (INFO commandstats)
           and Redis CPU per decision; share over limit; the generator's own CPU per request;
           and ratios to the floor.

Server CPU is utime + stime of the server process from /proc/<pid>/stat, between the moments
sluice-bench reports the start and the end of its measured interval (--print_phases), divided by
the calls completed in it. Only the standard library is used; only 127.0.0.1 is contacted.
bench/run (the wrapper) builds first unless given --no-build.
"""

import argparse
import csv
import io
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
HOST = "127.0.0.1"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes


def proc_start_time(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks since boot), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def machine_busy_seconds():
    """CPU seconds the whole machine spent busy (every CPU, every process, steal included)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def children_cpu_seconds():
    """CPU seconds of this script's children that have been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def proc_threads(pid):
    """Per thread name (trailing digits folded: redis-io-0, redis-io-1 -> redis-io-#), summed
    over a process's threads from /proc/PID/task/*: [voluntary switches, involuntary switches,
    CPU seconds]. A voluntary switch is a thread going to sleep (a futex wait, epoll_wait, a
    blocking read) and so, on a loaded machine, roughly a wake-up paid for later; counts, not
    times, so noise moves them far less than CPU time. A thread that exited in the interval is
    not counted."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        task = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{task}/comm") as f:
                comm = f.read().strip()
            name = comm.rstrip("0123456789")
            name = name + "#" if name != comm else name
            cpu_s = stat_cpu_seconds(f"{task}/stat")
            voluntary = involuntary = 0
            with open(f"{task}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        voluntary = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        involuntary = int(line.split()[1])
        except OSError:
            continue  # the thread ended meanwhile
        total = threads.setdefault(name, [0, 0, 0.0])
        total[0] += voluntary
        total[1] += involuntary
        total[2] += cpu_s
    return threads


def stat_cpu_seconds(path):
    """utime + stime from a /proc stat file (a process's: every thread; a task's: that one), in
    seconds."""
    with open(path) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_cpu_seconds(pid):
    """utime + stime of a process (every thread), in seconds."""
    return stat_cpu_seconds(f"/proc/{pid}/stat")


class Children:
    """Every process this script starts, recorded in the pid file bench/run's trap reads."""

    def __init__(self, pidfile, workdir):
        self.pidfile = pidfile
        self.workdir = workdir
        self.procs = {}  # pid -> (Popen, name)

    def _write(self):
        with open(self.pidfile, "w") as f:
            for pid, (proc, name) in self.procs.items():
                start = proc_start_time(pid)
                if start is not None:
                    f.write(f"{pid} {start} {name}\n")

    def start(self, name, argv, **kwargs):
        if "stdout" not in kwargs:
            with open(os.path.join(self.workdir, f"{name}.log"), "ab") as logf:
                proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, **kwargs)
        else:
            proc = subprocess.Popen(argv, **kwargs)
        self.procs[proc.pid] = (proc, name)
        self._write()
        return proc

    def forget(self, proc):
        if proc.pid in self.procs:
            del self.procs[proc.pid]
            self._write()

    def stop(self, proc, timeout=10):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.forget(proc)

    def stop_all(self):
        for proc, _ in list(self.procs.values()):
            self.stop(proc, timeout=5)

    def log_tail(self, name, lines=20):
        try:
            with open(os.path.join(self.workdir, f"{name}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, name, children, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{children.log_tail(name)}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {HOST}:{port} in {timeout}s")


def http_get(port, path, timeout=5):
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


# ---------------------------------------------------------------------------------------------
# Redis


class RedisError(Exception):
    pass


class Redis:
    """A minimal blocking RESP2 client for set-up and statistics."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def close(self):
        self.f.close()
        self.sock.close()

    def cmd(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(parts))
        return self._read()

    def _read(self):
        line = self.f.readline()
        if not line:
            raise RedisError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RedisError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RedisError(f"bad reply {line!r}")

    def commandstats(self):
        """{command: {calls, usec, failed_calls, rejected_calls}} from INFO commandstats."""
        stats = {}
        for line in self.cmd("INFO", "commandstats").splitlines():
            if not line.startswith("cmdstat_"):
                continue
            name, values = line[len("cmdstat_"):].split(":", 1)
            fields = dict(kv.split("=", 1) for kv in values.split(","))
            stats[name] = {k: float(fields.get(k, 0))
                           for k in ("calls", "usec", "failed_calls", "rejected_calls")}
        return stats


def make_tls_files(workdir):
    """A CA and a server certificate for 127.0.0.1 in workdir/tls (openssl CLI): ca.crt,
    server.crt, server.key. Returns the directory."""
    tls_dir = os.path.join(workdir, "tls")
    os.makedirs(tls_dir, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(tls_dir, "server.ext"), "w") as ext:
        ext.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for argv in (
            ["openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=bench-ca",
             "-keyout", "ca.key", "-out", "ca.crt"],
            ["openssl", "req", *ec, "-subj", "/CN=bench-redis", "-keyout", "server.key",
             "-out", "server.csr"],
            ["openssl", "x509", "-req", "-days", "2", "-in", "server.csr", "-CA", "ca.crt",
             "-CAkey", "ca.key", "-CAcreateserial", "-extfile", "server.ext",
             "-out", "server.crt"]):
        subprocess.run(argv, cwd=tls_dir, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return tls_dir


def start_redis(children, workdir, tls_port=None, tls_dir=None):
    """redis-server on a free port (plain: this script's own client speaks plain RESP); with
    tls_port and tls_dir (make_tls_files) it also serves TLS there, client certificates
    optional."""
    port = free_port()
    rdir = os.path.join(workdir, "redis")
    os.makedirs(rdir, exist_ok=True)
    argv = [
        "redis-server", "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
        "--dir", rdir, "--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
    ]
    if tls_port is not None:
        argv += ["--tls-port", str(tls_port),
                 "--tls-cert-file", os.path.join(tls_dir, "server.crt"),
                 "--tls-key-file", os.path.join(tls_dir, "server.key"),
                 "--tls-ca-cert-file", os.path.join(tls_dir, "ca.crt"),
                 "--tls-auth-clients", "optional"]
    proc = children.start("redis-server", argv)
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited:\n{children.log_tail('redis-server')}")
        try:
            r = Redis(port)
            if r.cmd("PING") == "PONG":
                return proc, port, r
        except (OSError, RedisError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stats_delta(before, after):
    out = {}
    for name, a in after.items():
        b = before.get(name, {})
        d = {k: a[k] - b.get(k, 0) for k in a}
        if any(d.values()):
            out[name] = d
    return out


def wait_redis_idle(redis, quiet_s=0.3, timeout_s=60):
    """Waits until Redis has run no EVALSHA for `quiet_s`: work left over from an earlier run
    (calls whose callers gave up at their deadline are still executed) would otherwise count in
    the next one. Returns (seconds waited, EVALSHA calls run meanwhile)."""
    def calls():
        stats = redis.commandstats()
        return sum(stats.get(name, {}).get("calls", 0) for name in SLUICE_COMMANDS)

    start = last_change = time.monotonic()
    first = last = calls()
    while True:
        time.sleep(0.05)
        now, current = time.monotonic(), calls()
        if current != last:
            last, last_change = current, now
        elif now - last_change >= quiet_s or now - start > timeout_s:
            return (last_change - start if last != first else 0.0), last - first


def is_admin_command(name):
    return name == "info" or name == "config" or name.startswith("config|")


# The commands Sluice sends itself (the scripts' own GET/SET/... are inside EVALSHA's usec and
# are not counted again): the scripts (a denied lone fixed window's give_back included), a lone
# fixed window's INCRBY + PEXPIRE, and the clock sample (TIME, once a second).
SLUICE_COMMANDS = ("evalsha", "incrby", "pexpire", "time")


def sluice_usec(delta):
    return sum(delta.get(name, {}).get("usec", 0) for name in SLUICE_COMMANDS)


# ---------------------------------------------------------------------------------------------
# Servers under test


class Target:
    """A gRPC server under test: its process, address, and what to sample while measuring."""

    def __init__(self, children, name, proc, grpc_port, http_port=None, redis=None,
                 redis_pid=None):
        self.children = children
        self.name = name
        self.proc = proc
        self.grpc_port = grpc_port
        self.http_port = http_port
        self.redis = redis
        self.redis_pid = redis_pid


def start_floor(children, build_bin):
    port = free_port()
    proc = children.start("sluice-floor", [
        os.path.join(build_bin, "sluice-floor"), f"--grpc_address={HOST}:{port}"])
    wait_for_port(port, proc, "sluice-floor", children)
    return Target(children, "sluice-floor", proc, port)


def start_sluice(children, build_bin, backend, redis_port=None, redis=None, redis_pid=None,
                 extra_flags=()):
    grpc_port, http_port = free_port(), free_port()
    name = f"sluice-{backend}"
    argv = [os.path.join(build_bin, "sluice"), f"--config={os.path.join(REPO, 'bench', 'config')}",
            f"--backend={backend}", f"--grpc_address={HOST}:{grpc_port}",
            f"--http_address={HOST}:{http_port}", "--log_level=warning",
            "--config_poll_interval=0"]
    if backend == "redis":
        argv.append(f"--redis_addresses={HOST}:{redis_port}")
    argv.extend(extra_flags)
    proc = children.start(name, argv)
    wait_for_port(grpc_port, proc, name, children)
    wait_for_port(http_port, proc, name, children)
    deadline = time.monotonic() + 15
    while http_get(http_port, "/readyz")[0] != 200:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{name} not ready:\n{children.log_tail(name)}")
        time.sleep(0.05)
    return Target(children, name, proc, grpc_port, http_port, redis, redis_pid)


def backend_failures(target):
    """sluice_backend_failures_total from /metrics, or None for a server without it."""
    if target.http_port is None:
        return None
    status, body = http_get(target.http_port, "/metrics")
    if status != 200:
        return None
    total = 0.0
    for line in body.splitlines():
        if line.startswith("sluice_backend_failures_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class ServerDied(RuntimeError):
    pass


def check_alive(target):
    code = target.proc.poll()
    if code is not None:
        how = f"signal {-code}" if code < 0 else f"exit status {code}"
        tail = target.children.log_tail(target.name).strip()
        raise ServerDied(f"{target.name} died ({how})" +
                         (f"; its log ends:\n{tail}" if tail else " without a word in its log"))


def sample(target, first):
    """What the server, Redis and Sluice's metrics say at one end of a measured interval. The
    order puts the slower probes outside the interval: CPU is read last at its start and first
    at its end."""
    check_alive(target)
    s = {"t": time.monotonic(), "machine_busy": machine_busy_seconds()}

    def probes():
        if target.redis is not None:
            s["redis_stats"] = target.redis.commandstats()
            s["redis_cpu"] = proc_cpu_seconds(target.redis_pid)
        s["failures"] = backend_failures(target)

    if first:
        probes()
        s["server_threads"] = proc_threads(target.proc.pid)
    s["server_cpu"] = proc_cpu_seconds(target.proc.pid)
    if not first:
        s["server_threads"] = proc_threads(target.proc.pid)
        probes()
    return s


def run_bench(children, build_bin, target, workload, rate, concurrency, opts):
    """One sluice-bench run against `target`; its JSON plus the server-side numbers."""
    argv = [os.path.join(build_bin, "sluice-bench"), f"--server={HOST}:{target.grpc_port}",
            f"--domain={workload['domain']}", "--key=key",
            f"--keyspace={workload['keyspace']}", f"--descriptors={workload['descriptors']}",
            f"--rate={rate:.0f}", f"--concurrency={concurrency}",
            f"--duration={opts.duration}", f"--warmup={opts.warmup}",
            f"--channels={opts.channels}", "--json", "--print_phases"]
    drain = None
    if target.redis is not None:
        drain = wait_redis_idle(target.redis)
        target.redis.cmd("CONFIG", "RESETSTAT")
    proc = children.start("sluice-bench", argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    before = after = None
    other = []
    try:
        for line in proc.stderr:
            if line.startswith("sluice-bench: measuring"):
                before = sample(target, first=True)
            elif line.startswith("sluice-bench: measured"):
                after = sample(target, first=False)
            else:
                other.append(line)
        out = proc.stdout.read()
        proc.wait()
    finally:
        children.stop(proc)
    check_alive(target)
    if proc.returncode != 0 or before is None or after is None:
        raise RuntimeError(f"sluice-bench failed ({proc.returncode}): {''.join(other)}{out}")
    result = json.loads(out)
    # Server-side totals cover the interval, so they are divided by the calls that completed in
    # it (in an overloaded open loop, not the calls scheduled in it).
    requests = max(result["completed_in_interval"], 1)
    decisions = requests * workload["descriptors"]
    result["server_cpu_s"] = after["server_cpu"] - before["server_cpu"]
    result["server_cpu_us_per_request"] = result["server_cpu_s"] * 1e6 / requests
    # By thread name, and in all: switches and CPU per request (proc_threads).
    threads = {}
    for name, (voluntary, involuntary, cpu_s) in after["server_threads"].items():
        start = before["server_threads"].get(name, [0, 0, 0.0])
        threads[name] = {"voluntary": (voluntary - start[0]) / requests,
                         "involuntary": (involuntary - start[1]) / requests,
                         "cpu_us": (cpu_s - start[2]) * 1e6 / requests}
    result["server_threads_per_request"] = threads
    result["server_switches_per_request"] = {
        kind: sum(t[kind] for t in threads.values()) for kind in ("voluntary", "involuntary")}
    # What the rest of the machine used meanwhile (other users' work, steal): noise to know of.
    ours = result["server_cpu_s"] + result["client_cpu"]["user_s"] + result["client_cpu"]["sys_s"]
    if target.redis is not None:
        ours += after["redis_cpu"] - before["redis_cpu"]
    elapsed = after["t"] - before["t"]
    result["other_load_cores"] = max(
        0.0, (after["machine_busy"] - before["machine_busy"] - ours) / elapsed)
    if before.get("failures") is not None and after.get("failures") is not None:
        result["backend_failures"] = after["failures"] - before["failures"]
    if drain is not None:
        result["redis_drain_s"], result["redis_stale_evalsha"] = drain
    if target.redis is not None:
        delta = stats_delta(before["redis_stats"], after["redis_stats"])
        evalsha = delta.get("evalsha", {})
        result["redis"] = {
            "commandstats": delta,
            "evalsha_calls": evalsha.get("calls", 0),
            "evalsha_failed": evalsha.get("failed_calls", 0) + evalsha.get("rejected_calls", 0),
            "usec_per_decision": sluice_usec(delta) / decisions,
            "commands_per_decision": sum(v.get("calls", 0) for k, v in delta.items()
                                         if not is_admin_command(k)) / decisions,
            "cpu_us_per_decision": (after["redis_cpu"] - before["redis_cpu"]) * 1e6 / decisions,
        }
    return result


def measure_row(children, build_bin, target, workload, opts):
    """The three runs of a gRPC row: saturation, the fixed rate, half the saturation rate."""
    row = {"name": workload["name"], "kind": "grpc", "workload": workload}
    log(f"  {workload['name']}: saturation (closed loop, concurrency {opts.concurrency})")
    row["saturation"] = run_bench(children, build_bin, target, workload, 0, opts.concurrency, opts)
    log(f"    {row['saturation']['rps']:.0f} requests/s")
    log(f"  {workload['name']}: open loop at {opts.rate:.0f}/s")
    row["at_rate"] = run_bench(children, build_bin, target, workload, opts.rate,
                               opts.open_concurrency, opts)
    half = row["saturation"]["rps"] / 2
    if half >= 1:
        log(f"  {workload['name']}: open loop at {half:.0f}/s (half of saturation)")
        row["at_half"] = run_bench(children, build_bin, target, workload, half,
                                   opts.open_concurrency, opts)
    return row


def redis_alone_row(children, build_dir, redis_port, redis, redis_pid, opts):
    """redis-benchmark running the token-bucket script by EVALSHA with pipelining."""
    script_path = os.path.join(build_dir, "gen", "lua", "token_bucket.lua")
    with open(script_path, "rb") as f:
        sha = redis.cmd("SCRIPT", "LOAD", f.read())
    # The text form of the contract of lua/README.md (redis-benchmark cannot send the packed
    # form's binary argument): EVALSHA sha 1 key now limit period_us burst hits, the bench
    # config's 1000 per second with bursts of 1000, hits 1, now fixed at the row's start.
    now = str(int(time.time() * 1e6))
    call_args = [sha, "1", "bench:{__rand_int__}tb:1", now, "1000", "1000000", "1000", "1"]
    reply = redis.cmd("EVALSHA", sha, "1", "bench:{probe}tb:1", now, "1000", "1000000", "1000",
                      "1")
    if not (isinstance(reply, list) and len(reply) == 5 and reply[0] == 1):
        raise RuntimeError(f"token_bucket script answered {reply!r}")

    def bench(n):
        argv = ["redis-benchmark", "-h", HOST, "-p", str(redis_port), "-c",
                str(opts.redis_clients), "-P", str(opts.redis_pipeline), "-n", str(n), "-r",
                str(opts.keyspace), "--csv", "EVALSHA"] + call_args
        proc = children.start("redis-benchmark", argv, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate()
        children.forget(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"redis-benchmark failed: {err}{out}")
        rows = list(csv.DictReader(io.StringIO(out)))
        if not rows:
            raise RuntimeError(f"redis-benchmark printed no result: {out}")
        return rows[-1]

    wait_redis_idle(redis)
    log("  redis alone: calibrating")
    calibration = bench(max(20000, opts.redis_pipeline * opts.redis_clients * 10))
    n = max(10000, int(float(calibration["rps"]) * opts.duration))
    log(f"  redis alone: {n} EVALSHA, {opts.redis_clients} clients, pipeline {opts.redis_pipeline}")
    redis.cmd("FLUSHALL")
    redis.cmd("CONFIG", "RESETSTAT")
    before_stats, before_cpu = redis.commandstats(), proc_cpu_seconds(redis_pid)
    before_busy, before_children = machine_busy_seconds(), children_cpu_seconds()
    t0 = time.monotonic()
    result = bench(n)
    elapsed = time.monotonic() - t0
    after_busy, after_children = machine_busy_seconds(), children_cpu_seconds()
    after_cpu, after_stats = proc_cpu_seconds(redis_pid), redis.commandstats()
    ours = (after_cpu - before_cpu) + (after_children - before_children)
    delta = stats_delta(before_stats, after_stats)
    evalsha = delta.get("evalsha", {})
    calls = max(evalsha.get("calls", 0), 1)
    rps = float(result["rps"])
    return {
        "name": "Redis alone: EVALSHA token_bucket (text form)",
        "kind": "redis-benchmark",
        "workload": {"requests": n, "clients": opts.redis_clients,
                     "pipeline": opts.redis_pipeline, "keyspace": opts.keyspace},
        "saturation": {
            "rps": rps, "decisions_per_s": rps, "requests": n, "elapsed_s": elapsed,
            "latency_ms": {"p50": float(result["p50_latency_ms"]),
                           "p99": float(result["p99_latency_ms"]),
                           "max": float(result["max_latency_ms"])},
            "server_cpu_us_per_request": (after_cpu - before_cpu) * 1e6 / n,
            "client_cpu": {"us_per_request": (after_children - before_children) * 1e6 / n},
            "other_load_cores": max(0.0, (after_busy - before_busy - ours) / elapsed),
            "redis": {
                "commandstats": delta,
                "evalsha_calls": evalsha.get("calls", 0),
                "evalsha_failed": evalsha.get("failed_calls", 0)
                + evalsha.get("rejected_calls", 0),
                "usec_per_decision": evalsha.get("usec", 0) / calls,
                "commands_per_decision": sum(v.get("calls", 0) for k, v in delta.items()
                                             if not is_admin_command(k)) / calls,
                "cpu_us_per_decision": (after_cpu - before_cpu) * 1e6 / calls,
            },
        },
    }


# ---------------------------------------------------------------------------------------------
# The table


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def ratio(a, b):
    return None if a is None or not b else a / b


def table(rows, opts):
    floor = next((r for r in rows if r["workload"].get("server") == "floor"), None)
    floor_cpu = floor["at_rate"]["server_cpu_us_per_request"] if floor else None
    floor_rps = floor["saturation"]["rps"] if floor else None
    header = ["row", "req/s", "dec/s", "p50 ms", "p99 ms", "CPU us/req", f"CPU us/req",
              "p99 ms", "Redis us", "Redis us", "Redis cmd", "Redis CPU", "over", "gen us/req",
              "gen us/req",
              "CPU x", "req/s x", "others"]
    header2 = ["", "(sat.)", "(sat.)", "(sat.)", "(sat.)", "(sat.)", f"@{opts.rate:.0f}/s",
               "@sat/2", "/dec sat.", f"@{opts.rate:.0f}/s", "/dec", "us/dec", "limit", "(sat.)",
               f"@{opts.rate:.0f}/s",
               "floor", "floor", "cores"]
    lines = []
    for r in rows:
        sat = r["saturation"]
        at_rate = r.get("at_rate")
        at_half = r.get("at_half")
        redis = sat.get("redis")
        redis_at_rate = at_rate.get("redis") if at_rate else None
        cpu_rate = at_rate["server_cpu_us_per_request"] if at_rate else None
        over = None
        if r["kind"] == "grpc":
            answered = sat["ok"] + sat["over_limit"]
            over = 100.0 * sat["over_limit"] / answered if answered else None
        gen = sat.get("client_cpu", {}).get("us_per_request")
        is_floor = r is floor
        lines.append([
            r["name"],
            fmt(sat["rps"], ",.0f"),
            fmt(sat.get("decisions_per_s"), ",.0f"),
            fmt(sat["latency_ms"]["p50"], ".3f"),
            fmt(sat["latency_ms"]["p99"], ".3f"),
            fmt(sat["server_cpu_us_per_request"], ".1f"),
            fmt(cpu_rate, ".1f"),
            fmt(at_half["latency_ms"]["p99"] if at_half else None, ".3f"),
            fmt(redis["usec_per_decision"] if redis else None, ".2f"),
            fmt(redis_at_rate["usec_per_decision"] if redis_at_rate else None, ".2f"),
            fmt(redis["commands_per_decision"] if redis else None, ".2f"),
            fmt(redis["cpu_us_per_decision"] if redis else None, ".1f"),
            fmt(over, ".0f") + ("%" if over is not None else ""),
            fmt(gen, ".1f"),
            fmt(at_rate["client_cpu"]["us_per_request"] if at_rate else None, ".1f"),
            fmt(None if r["kind"] != "grpc" or is_floor else ratio(cpu_rate, floor_cpu), ".2f"),
            fmt(None if r["kind"] != "grpc" or is_floor else ratio(sat["rps"], floor_rps),
                ".2f"),
            fmt(max([x["other_load_cores"] for x in (sat, at_rate, at_half)
                     if x and "other_load_cores" in x], default=None), ".2f"),
        ])
    widths = [max(len(x[i]) for x in [header, header2] + lines) for i in range(len(header))]

    def render(cells):
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                         for i, c in enumerate(cells))

    out = [render(header), render(header2), "  ".join("-" * w for w in widths)]
    out += [render(line) for line in lines]
    return "\n".join(out)


def checks(rows):
    """Things a reader must know before trusting a number."""
    notes = []
    for r in rows:
        for phase in ("saturation", "at_rate", "at_half"):
            res = r.get(phase)
            if not res or r["kind"] != "grpc":
                continue
            if res.get("errors"):
                notes.append(f"{r['name']} ({phase}): {res['errors']} errors "
                             f"{res.get('errors_by_code')}")
            if res.get("unsent"):
                notes.append(f"{r['name']} ({phase}): {res['unsent']} requests never sent "
                             f"(generator behind the rate); counted in latency as lower bounds")
            if res.get("backend_failures"):
                notes.append(f"{r['name']} ({phase}): {res['backend_failures']:.0f} batches "
                             f"answered by --failure_mode (Redis over its budget)")
            if phase != "saturation" and res.get("rate") and \
                    res["rps"] < 0.98 * res["rate"]:
                notes.append(f"{r['name']} ({phase}): {res['rps']:.0f}/s answered of "
                             f"{res['rate']:.0f}/s offered: over capacity")
            if phase == "at_rate" and res.get("rate", 0) > r["saturation"]["rps"]:
                notes.append(f"{r['name']}: the fixed rate {res['rate']:.0f}/s is above this "
                             f"row's saturation ({r['saturation']['rps']:.0f}/s); its CPU per "
                             f"request there is measured in overload")
            if res.get("redis_stale_evalsha"):
                notes.append(f"{r['name']} ({phase}): before it, Redis was still running "
                             f"{res['redis_stale_evalsha']:.0f} EVALSHA of the previous run for "
                             f"{res['redis_drain_s']:.1f} s (calls past their deadline are not "
                             f"cancelled); the run waited for them")
            if res.get("redis", {}).get("evalsha_failed"):
                notes.append(f"{r['name']} ({phase}): {res['redis']['evalsha_failed']:.0f} "
                             f"EVALSHA failed")
        sat = r["saturation"]
        if r["kind"] == "grpc":
            answered = sat["ok"] + sat["over_limit"]
            share = sat["over_limit"] / answered if answered else 0
            expect = r["workload"].get("expect_over")
            if expect == "most" and share < 2 / 3:
                notes.append(f"{r['name']}: only {100 * share:.0f}% over limit (expected >= 67%)")
            if expect == "few" and share > 0.05:
                notes.append(f"{r['name']}: {100 * share:.0f}% over limit (expected ~0%)")
        elif sat["redis"]["evalsha_failed"]:
            notes.append(f"{r['name']}: {sat['redis']['evalsha_failed']:.0f} EVALSHA failed")
    return notes


# ---------------------------------------------------------------------------------------------


ROWS = ["floor", "memory", "redis_tb", "redis_tb_alone", "redis_fw", "surge", "multi",
        "redis_alone"]


def parse_args():
    p = argparse.ArgumentParser(
        prog="bench/run", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=None,
                   help="seconds measured per run (default 10; 2 with --quick); each row makes "
                        "three runs")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds of warm-up before each run (default 1; 0.5 with --quick)")
    p.add_argument("--rate", type=float, default=5000,
                   help="the fixed open-loop rate at which CPU per request is compared")
    p.add_argument("--quick", action="store_true", help="short runs: a smoke test of the bench")
    p.add_argument("--json-out", help="also write every number to this file as JSON")
    p.add_argument("--rows", default=",".join(ROWS),
                   help=f"comma-separated subset of {','.join(ROWS)}")
    p.add_argument("--concurrency", type=int, default=32,
                   help="calls in flight in the closed-loop (saturation) runs")
    p.add_argument("--open-concurrency", type=int, default=1000,
                   help="most calls in flight in the open-loop runs")
    p.add_argument("--channels", type=int, default=4, help="gRPC channels of sluice-bench")
    p.add_argument("--keyspace", type=int, default=100000, help="keys of the 100k-key rows")
    p.add_argument("--surge-keyspace", type=int, default=100,
                   help="keys of the surge row (10 per second each in bench/config/surge.yaml)")
    p.add_argument("--redis-clients", type=int, default=16, help="redis-benchmark -c")
    p.add_argument("--redis-pipeline", type=int, default=16, help="redis-benchmark -P")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--workdir", help="logs and Redis' directory (default: a new temp dir)")
    p.add_argument("--pidfile", help="where child pids are recorded (bench/run's EXIT trap)")
    opts = p.parse_args()
    if opts.duration is None:
        opts.duration = 2.0 if opts.quick else 10.0
    if opts.warmup is None:
        opts.warmup = 0.5 if opts.quick else 1.0
    opts.rows = [r.strip() for r in opts.rows.split(",") if r.strip()]
    unknown = [r for r in opts.rows if r not in ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}; choose among {ROWS}")
    if opts.rate <= 0 or opts.duration <= 0:
        p.error("--rate and --duration must be positive")
    return opts


def main():
    opts = parse_args()
    if opts.workdir is None:
        import tempfile
        opts.workdir = tempfile.mkdtemp(prefix="sluice-bench.")
    if opts.pidfile is None:
        opts.pidfile = os.path.join(opts.workdir, "pids")
    build_dir = os.path.abspath(opts.build_dir)
    build_bin = os.path.join(build_dir, "bin")
    for binary in ("sluice", "sluice-floor", "sluice-bench"):
        if not os.access(os.path.join(build_bin, binary), os.X_OK):
            sys.exit(f"bench/run: {build_bin}/{binary} is missing (build it: scripts/build "
                     f"sluice sluice-floor sluice-bench)")

    # SIGTERM ends the run like Ctrl-C: through the finally below, which stops every child.
    def on_sigterm(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_sigterm)
    children = Children(opts.pidfile, opts.workdir)
    k = opts.keyspace
    workloads = {
        "floor": dict(name="floor (gRPC alone)", server="floor", domain="bench_tb",
                      keyspace=k, descriptors=1),
        "memory": dict(name=f"memory, token bucket, {k // 1000}k keys", server="memory",
                       domain="bench_tb", keyspace=k, descriptors=1, expect_over="few"),
        "redis_tb": dict(name=f"Redis, token bucket, {k // 1000}k keys", server="redis",
                         domain="bench_tb", keyspace=k, descriptors=1, expect_over="few"),
        "redis_tb_alone": dict(name=f"Redis, token bucket, {k // 1000}k keys, max_batch 1",
                               server="redis_max_batch_1", domain="bench_tb", keyspace=k,
                               descriptors=1, expect_over="few"),
        "redis_fw": dict(name=f"Redis, fixed window, {k // 1000}k keys", server="redis",
                         domain="bench_fw", keyspace=k, descriptors=1, expect_over="few"),
        "surge": dict(name=f"Redis, surge: {opts.surge_keyspace} keys at 10/s", server="redis",
                      domain="bench_surge", keyspace=opts.surge_keyspace, descriptors=1,
                      expect_over="most"),
        "multi": dict(name=f"Redis, 5 descriptors, {k // 1000}k keys", server="redis",
                      domain="bench_multi", keyspace=k, descriptors=5, expect_over="few"),
    }
    with open("/proc/loadavg") as f:
        load_start = f.read().split()[:3]
    started = time.time()
    rows = []
    failures = []  # (row name, reason)
    servers = {}  # "floor" | "memory" | "redis" -> Target
    redis_proc = redis = redis_port = None

    def server(kind):
        """The server of `kind`, started (again, if it died) on demand."""
        target = servers.get(kind)
        if target is not None and target.proc.poll() is None:
            return target
        if target is not None:
            children.forget(target.proc)
        log(f"{kind}: starting {'sluice-floor' if kind == 'floor' else f'sluice --backend={kind}'}")
        if kind == "floor":
            target = start_floor(children, build_bin)
        elif kind == "memory":
            target = start_sluice(children, build_bin, "memory")
        elif kind == "redis_max_batch_1":
            target = start_sluice(children, build_bin, "redis", redis_port, redis, redis_proc.pid,
                                  ["--redis_max_batch=1"])
        else:
            target = start_sluice(children, build_bin, "redis", redis_port, redis, redis_proc.pid)
        servers[kind] = target
        return target

    def stop_server(kind):
        target = servers.pop(kind, None)
        if target is not None:
            children.stop(target.proc)

    try:
        for key in [r for r in ROWS if r in opts.rows]:
            if key == "redis_alone" or workloads[key]["server"].startswith("redis"):
                if redis is None:
                    log("redis: starting redis-server")
                    redis_proc, redis_port, redis = start_redis(children, opts.workdir)
                redis.cmd("FLUSHALL")
            try:
                if key == "redis_alone":
                    stop_server("redis")
                    rows.append(redis_alone_row(children, build_dir, redis_port, redis,
                                                redis_proc.pid, opts))
                    continue
                kind = workloads[key]["server"]
                for other in [k for k in servers if k != kind]:
                    stop_server(other)  # one server under test at a time
                rows.append(measure_row(children, build_bin, server(kind), workloads[key], opts))
            except RuntimeError as e:
                name = workloads[key]["name"] if key in workloads else key
                log(f"  {name}: FAILED: {e}")
                failures.append((name, str(e)))
    finally:
        if redis is not None:
            redis.close()
        children.stop_all()

    with open("/proc/loadavg") as f:
        load_end = f.read().split()[:3]
    meta = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": round(time.time() - started, 1),
        "cpus": os.cpu_count(),
        "loadavg_start": load_start,
        "loadavg_end": load_end,
        "duration_s": opts.duration, "warmup_s": opts.warmup, "rate": opts.rate,
        "concurrency": opts.concurrency, "open_concurrency": opts.open_concurrency,
        "channels": opts.channels, "keyspace": opts.keyspace,
    }
    print(f"Sluice benchmark: {meta['date']}, {meta['cpus']} CPUs, load average "
          f"{' '.join(load_start)} -> {' '.join(load_end)}; {opts.duration:g} s per run after "
          f"{opts.warmup:g} s warm-up; closed loop at concurrency {opts.concurrency}, "
          f"{opts.channels} channels; loopback")
    print()
    print(table(rows, opts))
    print()
    legend = (
        "sat. = closed loop (saturation). CPU us/req = the server process's utime+stime per "
        "request. Redis us/dec = INFO commandstats usec of the commands Sluice sends (EVALSHA, "
        "INCRBY, PEXPIRE, TIME) per decision, at saturation and at the fixed rate (usec is "
        "wall time inside each command: at the fixed rate Redis idles between calls and each "
        "call meets colder caches, so it costs more there); Redis cmd/dec = every command Redis ran "
        "(the scripts' own GET/SET included) per decision; Redis CPU = "
        "redis-server's utime+stime per decision. gen us/req = sluice-bench's own CPU per "
        "request (it shares the machine with the servers). x floor = CPU per request at the "
        "fixed rate, and saturation req/s, relative to the floor. others = the most CPU (cores) "
        "the rest of the machine used during any run of the row (other users' work, steal): "
        "noise. Redis alone: redis-benchmark, so its latencies are per pipelined command and "
        "its CPU is redis-server's.")
    print(textwrap.fill(legend, width=100))
    notes = checks(rows)
    if failures:
        print()
        print("failed rows:")
        for name, reason in failures:
            print(f"  {name}: {reason.strip()}")
    if notes:
        print()
        print("checks:")
        for n in notes:
            print(f"  ! {n}")
    if opts.json_out:
        with open(opts.json_out, "w") as f:
            json.dump({"meta": meta, "rows": rows,
                       "failed": [{"name": n, "reason": r} for n, r in failures]}, f, indent=2)
        log(f"wrote {opts.json_out}")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except RuntimeError as e:
        sys.exit(f"bench/run: {e}")
