#!/usr/bin/env python3
"""Sluice's cost guard: instructions per decision, counted by callgrind, on fixed workloads
through the real servers (driven by bench/cost).

Each server runs under `valgrind --tool=callgrind`; sluice-cost-client sends a fixed number of
requests one after the other (a warm-up first, then callgrind's counters are zeroed, then the
measured requests, then a dump). Instruction counts do not depend on how fast or busy the machine
is, so unlike time they can guard small changes. The dump is split by where the instructions ran:

  sluice    the server binary and the libraries only Sluice's own code drives (hiredis,
            libevent for HTTP, prometheus-cpp)
  grpc      libgrpc, libgrpc++, libgpr, upb, and what they bring (re2, c-ares, zlib, OpenSSL)
  protobuf  libprotobuf
  alloc     malloc/free and operator new/delete (glibc, libstdc++) and gpr_malloc/gpr_free
  other     the rest of libc and libstdc++, the dynamic loader (thread-local lookups in shared
            libraries), abseil outside its synchronization library
  lock      abseil's Mutex/CondVar (gRPC's locks are abseil's): not guarded and not in the
            total, because under callgrind a thread that finds a lock held spins until the
            scheduler switches threads, so the count depends on thread timing, not on the code
  syscalls  system calls per request (callgrind's sysCount, less the calls the vDSO answers
            natively: clock_gettime, gettimeofday, sched_getcpu): how often the process enters
            the kernel; informational, since wake-ups depend on timing

Redis scenarios also report, from Redis' INFO commandstats over the measured requests, the
commands Redis ran per request (the scripts' own GET/SET included; TIME, the once-a-second
clock sample, left out) and, in --json-out, Redis' own time per request (informational).

The guard: `total` (everything but lock) per request, per scenario, against the committed
baseline (bench/cost_baseline.json); more than --tolerance (3%) above it on any scenario fails,
after up to --retries (2) more rounds of that scenario (the least of every round counts).
Moving the baseline is a deliberate commit (--update-baseline) whose message says why.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (Children, free_port, Redis, ... of bench/run.py)

REPO = bench.REPO
HOST = bench.HOST
BASELINE = os.path.join(REPO, "bench", "cost_baseline.json")

# name: (server, transport, domain, descriptors per request, keyspace)
SCENARIOS = collections.OrderedDict([
    ("floor", ("floor", "grpc", "cost", 1, 1000)),
    ("memory_1", ("memory", "grpc", "cost", 1, 1000)),
    ("memory_5", ("memory", "grpc", "cost", 5, 1000)),
    ("memory_json", ("memory", "http", "cost", 1, 1000)),
    ("redis_1", ("redis", "grpc", "cost", 1, 1000)),
    ("redis_5", ("redis", "grpc", "cost", 5, 1000)),
    ("redis_over_limit_cache", ("redis", "grpc", "cost_over_limit", 1, 1)),
    ("redis_tls_1", ("redis_tls", "grpc", "cost", 1, 1000)),
    ("redis_1_traced", ("redis_traced", "grpc", "cost", 1, 1000)),
    ("redis_fw_1", ("redis", "grpc", "cost_fw", 1, 1000)),
    ("redis_fw_upstream_1", ("redis_upstream", "grpc", "cost_fw", 1, 1000)),
    ("memcached_fw_1", ("memcached", "grpc", "cost_fw", 1, 1000)),
    ("redis_hot_1", ("redis", "grpc", "cost", 1, 1)),
    ("redis_lease_hot_1", ("redis_lease", "grpc", "cost", 1, 1)),
    ("redis_lease_cold_1", ("redis_lease_cold", "grpc", "cost", 1, 1000)),
])
# Measured when asked for (--scenarios), not guarded: a comparison of backends on the one
# algorithm they all keep.
UNGUARDED = ("redis_fw_1", "redis_fw_upstream_1", "memcached_fw_1", "redis_hot_1",
             "redis_lease_hot_1", "redis_lease_cold_1")
SCENARIO_HELP = """\
  floor                   sluice-floor (gRPC alone, answers OK): what gRPC costs by itself
  memory_1                Sluice, memory backend, 1 token-bucket descriptor, admitted
  memory_5                the same with 5 descriptors per request
  memory_json             memory_1 over HTTP: POST /json on one keep-alive connection
  redis_1                 Sluice, Redis backend, 1 token-bucket descriptor, admitted
  redis_5                 the same with 5 descriptors per request
  redis_over_limit_cache  Redis backend, one key far over its limit: answered from the
                          over-limit cache without Redis
  redis_tls_1             redis_1 with TLS to Redis (--redis_tls, a CA of the run's own)
  redis_1_traced          redis_1 with every call traced (--tracing, sampling rate 1): the
                          decision's span and its Redis call's, exported over OTLP/HTTP to a
                          collector of the run's own (the export thread's work counts)
  redis_fw_1              (when asked for, unguarded) Redis backend, 1 fixed-window descriptor,
                          admitted: INCRBY + PEXPIRE NX, no script
  redis_fw_upstream_1     (when asked for, unguarded) redis_fw_1 in envoyproxy/ratelimit's keys
                          (--redis_key_layout=upstream): INCRBY + EXPIRE on upstream's key
  memcached_fw_1          (when asked for, unguarded) the same on the memcached backend: one
                          `ma` (increment-or-create) on a memcached 1.6 of the run's own
  redis_hot_1             (when asked for, unguarded) redis_1 on one key (keyspace 1)
  redis_lease_hot_1       (when asked for, unguarded) redis_hot_1 with leases
                          (--redis_lease_rate=10: hot at callgrind's pace): decided from the
                          replica's lease, a lease call every few hundred requests
  redis_lease_cold_1      (when asked for, unguarded) redis_1 with leases on
                          (--redis_lease_rate=1000): 1,000 keys, none hot; what counting
                          their hotness costs a cold key"""

CATEGORIES = ("sluice", "grpc", "protobuf", "alloc", "other", "lock")
GRPC_OBJECTS = ("libgrpc", "libgpr", "libupb", "libaddress_sorting", "libre2", "libcares",
                "libz.")
# OpenSSL is the Redis connections' TLS: gRPC is plaintext in every scenario.
SLUICE_OBJECTS = ("libhiredis", "libevent", "libprometheus", "libssl", "libcrypto")
ALLOC_FUNCTIONS = re.compile(
    r"^(malloc|free|calloc|realloc|cfree|_int_malloc|_int_free|_int_realloc|_int_memalign|"
    r"malloc_consolidate|unlink_chunk|sysmalloc|tcache_\w+|__libc_(malloc|free|calloc|realloc|"
    r"memalign)|_mid_memalign|posix_memalign|aligned_alloc|memalign|"
    r"operator new|operator delete|_Zn[wa]m|_Zd[la]Pv|gpr_malloc|gpr_free|gpr_zalloc|"
    r"gpr_realloc|gpr_malloc_aligned|gpr_free_aligned)")
# Calls served by the vDSO outside valgrind (no kernel entry), which callgrind counts as system
# calls because under valgrind they are.
VDSO_CALLS = ("clock_gettime@@GLIBC_2.17", "clock_gettime", "__clock_gettime", "gettimeofday",
              "__gettimeofday_syscall", "time", "sched_getcpu", "getcpu", "clock_getres")


# ---------------------------------------------------------------------------------------------
# Callgrind output


def read_callgrind(path):
    """Self cost per (object, function, event) of a callgrind dump. Handles the format's name
    compression ("(id) name" defines, "(id)" refers) and skips the inclusive cost line that
    follows each calls= line (the callee's cost, already counted where it ran)."""
    names = {}

    def name(kind, value):
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            names[(kind, m.group(1))] = m.group(2)
            return m.group(2)
        return names[(kind, m.group(1))]

    events = []
    obj = fn = None
    after_calls = False
    cost = collections.Counter()
    with open(path) as f:
        for line in f:
            first = line[:1]
            if first.isdigit() or first in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                for event, value in zip(events, line.split()[1:]):
                    cost[(obj, fn, event)] += int(value)
                continue
            key, _, value = line.partition("=")
            value = value.strip()
            if key == "ob":
                obj = name("ob", value)
            elif key == "fn":
                fn = name("fn", value)
            elif key in ("fl", "fi", "fe", "cfi", "cfl"):
                name("fl", value)
            elif key == "cob":
                name("ob", value)
            elif key == "cfn":
                name("fn", value)
            elif key == "calls":
                after_calls = True
            elif line.startswith("events:"):
                events = line.split()[1:]
    return cost


def category(obj, fn, server_binary):
    base = os.path.basename(obj or "")
    if ALLOC_FUNCTIONS.match(fn or ""):
        return "alloc"
    if "libabsl_synchronization" in base:
        return "lock"
    if obj == server_binary or base.startswith(SLUICE_OBJECTS):
        return "sluice"
    if base.startswith(GRPC_OBJECTS):
        return "grpc"
    if base.startswith("libprotobuf"):
        return "protobuf"
    return "other"


def summarize(cost, server_binary, requests):
    by_category = collections.Counter()
    syscalls = 0
    for (obj, fn, event), value in cost.items():
        if event == "Ir":
            by_category[category(obj, fn, server_binary)] += value
        elif event == "sysCount" and fn not in VDSO_CALLS:
            syscalls += value
    row = {c: by_category[c] / requests for c in CATEGORIES}
    row["total"] = sum(row[c] for c in CATEGORIES if c != "lock")
    row["syscalls"] = syscalls / requests
    return row


def top_functions(cost, requests, n):
    by_function = collections.Counter()
    for (obj, fn, event), value in cost.items():
        if event == "Ir":
            by_function[(os.path.basename(obj or "?"), fn)] += value
    return [(value / requests, obj, fn) for (obj, fn), value in by_function.most_common(n)]


# ---------------------------------------------------------------------------------------------
# Servers under callgrind


class Callgrind:
    """A server process under callgrind, zeroed and dumped on demand."""

    def __init__(self, children, name, argv, workdir):
        self.out = os.path.join(workdir, f"{name}.callgrind")
        self.dumps = 0
        self.proc = children.start(name, [
            "valgrind", "--tool=callgrind", "--collect-systime=yes",
            f"--callgrind-out-file={self.out}", *argv])
        self.binary = os.path.realpath(argv[0])

    def control(self, *args):
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def zero(self):
        self.control("-z")

    def dump(self):
        self.control("-d")
        self.dumps += 1
        path = f"{self.out}.{self.dumps}"
        deadline = time.monotonic() + 60
        # callgrind_control returns once the request is taken; the file is complete when its
        # totals line (the last one callgrind writes) is there.
        while True:
            try:
                with open(path) as f:
                    if any(line.startswith("totals:") for line in f):
                        return path
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"callgrind did not write {path}")
            time.sleep(0.1)


class Collector:
    """An OTLP/HTTP collector that takes every export and keeps nothing (for redis_1_traced)."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def start_memcached(children):
    """memcached (Debian's 1.6) on a free port, in the foreground."""
    port = bench.free_port()
    argv = ["memcached", "-l", HOST, "-p", str(port), "-U", "0", "-t", "1"]
    if os.getuid() == 0:
        argv += ["-u", "root"]
    proc = children.start("memcached", argv)
    bench.wait_for_port(port, proc, "memcached", children, timeout=15)
    return port


def start_server(children, build_bin, workdir, kind, redis_port=None, tls=None, collector=None,
                 memcached_port=None):
    grpc_port = bench.free_port()
    if kind == "floor":
        argv = [os.path.join(build_bin, "sluice-floor"), f"--grpc_address={HOST}:{grpc_port}"]
        http_port = None
    else:
        http_port = bench.free_port()
        argv = [os.path.join(build_bin, "sluice"),
                f"--config={os.path.join(REPO, 'bench', 'config')}",
                f"--backend={'redis' if kind.startswith('redis') else kind}",
                f"--grpc_address={HOST}:{grpc_port}", f"--http_address={HOST}:{http_port}",
                "--log_level=warning", "--config_poll_interval=0"]
        if kind == "redis_traced":
            argv += ["--tracing", "--tracing_sampling_rate=1",
                     f"--tracing_endpoint=http://{HOST}:{collector.port}/v1/traces"]
        if kind == "memcached":
            # Fixed windows only: the one file of them (the others hold token buckets).
            argv = [a for a in argv if not a.startswith("--config=")]
            argv += [f"--config={os.path.join(REPO, 'bench', 'config', 'cost_fixed_window.yaml')}",
                     f"--memcached_servers={HOST}:{memcached_port}", "--redis_timeout=10s",
                     "--redis_breaker_failures=1000000"]
        if kind == "redis_upstream":
            argv += ["--redis_key_layout=upstream", "--redis_key_prefix=",
                     "--redis_expiration_jitter=300s"]
        if kind == "redis_lease":
            argv += ["--redis_lease_rate=10"]
        if kind == "redis_lease_cold":
            argv += ["--redis_lease_rate=1000"]
        if kind in ("redis", "redis_tls", "redis_traced", "redis_upstream", "redis_lease",
                    "redis_lease_cold"):
            # Under callgrind Sluice runs ~50 times slower: give each decision time enough that
            # no failure policy ever answers.
            argv += ["--redis_timeout=10s", "--redis_breaker_failures=1000000"]
            if kind != "redis_tls":
                argv.append(f"--redis_addresses={HOST}:{redis_port}")
            else:
                tls_port, tls_dir = tls
                argv += [f"--redis_addresses={HOST}:{tls_port}", "--redis_tls",
                         f"--redis_tls_ca={os.path.join(tls_dir, 'ca.crt')}"]
    server = Callgrind(children, f"{kind}-server", argv, workdir)
    bench.wait_for_port(grpc_port, server.proc, f"{kind}-server", children, timeout=180)
    if http_port is not None:
        # The listeners open one after the other: under callgrind, far enough apart to matter.
        bench.wait_for_port(http_port, server.proc, f"{kind}-server", children, timeout=180)
    server.grpc_port, server.http_port = grpc_port, http_port
    return server


def send(build_bin, server, transport, domain, descriptors, keyspace, requests):
    target = (f"--http={server.http_port}" if transport == "http"
              else f"--server={HOST}:{server.grpc_port}")
    out = subprocess.run(
        [os.path.join(build_bin, "sluice-cost-client"), target, f"--requests={requests}",
         f"--domain={domain}", f"--descriptors={descriptors}", f"--keyspace={keyspace}"],
        check=False, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sluice-cost-client failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout)


def redis_commands(delta):
    calls = sum(d["calls"] for name, d in delta.items()
                if name != "time" and not bench.is_admin_command(name))
    usec = sum(d["usec"] for name, d in delta.items() if not bench.is_admin_command(name))
    return calls, usec


def measure(opts, build_bin, server, name, redis, limit=None):
    """The least of opts.repeat runs. Past `limit` (the baseline's tolerance), up to opts.retries
    more rounds: a Redis scenario's count depends a little on scheduling (a loop thread that
    wakes more often, when other work shares the cores, runs more of its loop per request), and
    a neighbour's burst passes, where a change in the code stays over in every round."""
    best = measure_round(opts, build_bin, server, name, redis, opts.warmup)
    for attempt in range(opts.retries):
        if limit is None or best["total"] <= limit:
            break
        bench.log(f"bench/cost: {name}: {best['total']:.0f} is over {limit:.0f}; "
                  f"measuring again ({attempt + 1} of {opts.retries})")
        time.sleep(2)
        again = measure_round(opts, build_bin, server, name, redis, 0)
        best = min(best, again, key=lambda r: r["total"])
    return best


def measure_round(opts, build_bin, server, name, redis, warmup):
    _, transport, domain, descriptors, keyspace = SCENARIOS[name]
    if warmup:
        send(build_bin, server, transport, domain, descriptors, keyspace, warmup)
    rows = []
    for _ in range(opts.repeat):
        before = redis.commandstats() if redis else None
        server.zero()
        counts = send(build_bin, server, transport, domain, descriptors, keyspace, opts.requests)
        path = server.dump()
        cost = read_callgrind(path)
        row = summarize(cost, server.binary, opts.requests)
        row["answers"] = {k: counts[k] for k in ("ok", "over_limit")}
        if redis:
            calls, usec = redis_commands(bench.stats_delta(before, redis.commandstats()))
            row["redis_cmds"] = calls / opts.requests
            row["redis_us"] = usec / opts.requests
        row["_cost"] = cost
        rows.append(row)
    # The least of the repeats: what the code costs with the fewest stray wake-ups.
    best = min(rows, key=lambda r: r["total"])
    return best


# ---------------------------------------------------------------------------------------------
# Report


def fmt_k(value):
    return f"{value / 1000:.1f}k"


def print_table(results, baseline, tolerance):
    head = (f"{'scenario':<24}{'total/req':>10}{'sluice':>9}{'grpc':>9}{'protobuf':>9}"
            f"{'alloc':>8}{'other':>8}{'lock*':>8}{'sys/req':>8}{'redis':>7}{'baseline':>10}"
            f"{'change':>8}")
    print(head)
    failures = []
    for name, row in results.items():
        base = baseline.get(name, {}).get("total")
        change = "" if not base else f"{(row['total'] / base - 1) * 100:+.1f}%"
        redis = f"{row['redis_cmds']:.2f}" if "redis_cmds" in row else "-"
        print(f"{name:<24}{fmt_k(row['total']):>10}{fmt_k(row['sluice']):>9}"
              f"{fmt_k(row['grpc']):>9}{fmt_k(row['protobuf']):>9}{fmt_k(row['alloc']):>8}"
              f"{fmt_k(row['other']):>8}{fmt_k(row['lock']):>8}{row['syscalls']:>8.1f}"
              f"{redis:>7}{(fmt_k(base) if base else '-'):>10}{change:>8}")
        if base and row["total"] > base * (1 + tolerance):
            failures.append(f"{name}: {row['total']:.0f} instructions per request, "
                            f"{(row['total'] / base - 1) * 100:+.1f}% over the baseline's "
                            f"{base:.0f} (tolerance {tolerance * 100:.0f}%)")
        if base and row["total"] < base * (1 - tolerance):
            print(f"  {name}: {(1 - row['total'] / base) * 100:.1f}% under the baseline: "
                  "move it (--update-baseline) in a commit that says why", file=sys.stderr)
    print("\ninstructions per request (k = thousand); total = all but lock*; lock* (abseil "
          "Mutex/CondVar, spinning under callgrind) is\nnot guarded; sys/req = system calls per "
          "request; redis = commands Redis ran per request (the scripts' own included, TIME excluded)")
    return failures


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="scenarios:\n" + SCENARIO_HELP)
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--scenarios", default=",".join(n for n in SCENARIOS if n not in UNGUARDED),
                   help="comma-separated scenarios (default: all)")
    p.add_argument("--requests", type=int, default=1000, help="measured requests per repeat")
    p.add_argument("--warmup", type=int, default=200, help="requests sent before measuring")
    p.add_argument("--repeat", type=int, default=3,
                   help="measured runs per scenario; the least total counts")
    p.add_argument("--tolerance", type=float, default=0.03)
    p.add_argument("--retries", type=int, default=2,
                   help="rounds measured again for a scenario over the tolerance; the least counts")
    p.add_argument("--baseline", default=BASELINE)
    p.add_argument("--update-baseline", action="store_true",
                   help="write the measured totals as the new baseline instead of comparing")
    p.add_argument("--top", type=int, default=0,
                   help="also print the N functions costing most per request, per scenario")
    p.add_argument("--json-out", help="write every figure as JSON to this file")
    p.add_argument("--workdir")
    p.add_argument("--pidfile")
    opts = p.parse_args()
    names = [s.strip() for s in opts.scenarios.split(",") if s.strip()]
    unknown = [s for s in names if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenarios {unknown}; choose among {list(SCENARIOS)}")
    if opts.update_baseline and names != [n for n in SCENARIOS if n not in UNGUARDED]:
        p.error("--update-baseline measures every scenario")

    workdir = opts.workdir or tempfile.mkdtemp(prefix="sluice-cost.")
    children = bench.Children(opts.pidfile or os.path.join(workdir, "pids"), workdir)
    build_bin = os.path.join(os.path.abspath(opts.build_dir), "bin")
    baseline = {}
    if os.path.exists(opts.baseline) and not opts.update_baseline:
        with open(opts.baseline) as f:
            baseline = json.load(f)["scenarios"]

    results = collections.OrderedDict()
    started = time.monotonic()
    try:
        redis = redis_port = tls = collector = None
        redis_kinds = ("redis", "redis_tls", "redis_traced", "redis_upstream", "redis_lease",
                       "redis_lease_cold")
        if any(SCENARIOS[n][0] == "redis_traced" for n in names):
            collector = Collector()
        if any(SCENARIOS[n][0] in redis_kinds for n in names):
            # One Redis for both: plain on its port, TLS on another.
            tls = (bench.free_port(), bench.make_tls_files(workdir))
            _, redis_port, redis = bench.start_redis(children, workdir, *tls)
        memcached_port = None
        if any(SCENARIOS[n][0] == "memcached" for n in names):
            memcached_port = start_memcached(children)
        for kind in ("floor", "memory", "redis", "redis_tls", "redis_traced", "redis_upstream",
                     "redis_lease", "redis_lease_cold", "memcached"):
            mine = [n for n in names if SCENARIOS[n][0] == kind]
            if not mine:
                continue
            server = start_server(children, build_bin, workdir, kind, redis_port, tls, collector,
                                  memcached_port)
            for name in mine:
                base = baseline.get(name, {}).get("total")
                results[name] = measure(opts, build_bin, server, name,
                                        redis if kind in redis_kinds else None,
                                        base * (1 + opts.tolerance) if base else None)
                if results[name]["answers"]["ok"] + results[name]["answers"]["over_limit"] \
                        != opts.requests:
                    raise RuntimeError(f"{name}: not every request was answered")
            children.stop(server.proc, timeout=30)
    finally:
        children.stop_all()
        if collector:
            collector.stop()

    failures = print_table(results, baseline, opts.tolerance)
    bench.log(f"bench/cost: {len(names)} scenarios in {time.monotonic() - started:.0f}s "
              f"({opts.repeat} x {opts.requests} requests each, under callgrind)")
    for name, row in results.items():
        if opts.top:
            print(f"\n{name}: top {opts.top} functions (self instructions per request)")
            for value, obj, fn in top_functions(row["_cost"], opts.requests, opts.top):
                print(f"{value:>10.0f}  {obj:<36} {fn[:110]}")
    clean = {n: {k: v for k, v in r.items() if not k.startswith("_")} for n, r in results.items()}
    if opts.json_out:
        with open(opts.json_out, "w") as f:
            json.dump(clean, f, indent=1)
    if opts.update_baseline:
        with open(opts.baseline, "w") as f:
            json.dump({"about": "bench/cost: instructions per request under callgrind; "
                                "`total` is guarded (bench/cost.py)",
                       "scenarios": {n: {"total": round(r["total"]),
                                         **{c: round(r[c]) for c in CATEGORIES},
                                         "syscalls": round(r["syscalls"], 1),
                                         **({"redis_cmds": round(r["redis_cmds"], 2)}
                                            if "redis_cmds" in r else {})}
                                     for n, r in clean.items()}}, f, indent=1)
            f.write("\n")
        bench.log(f"bench/cost: baseline written to {opts.baseline}")
        return 0
    for failure in failures:
        bench.log(f"bench/cost: FAIL {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
