#!/usr/bin/env python3
"""What a metrics flood and stalled scrapers cost Sluice (issue 41), measured from outside.

For each `sluice` binary (--sluice, repeatable: a before/after in one run), in this order:

  start    sluice on free 127.0.0.1 ports, memory backend, a config of its own (domain `flood`:
           key `user`, 100/hour; domain `bench`: key `key` with `detailed_metric: true`, so each
           value is a per-rule series of its own), --prometheus_address on a free port
  flood    --flood-requests POST /json requests of --flood-descriptors descriptors each, one
           keep-alive connection, each descriptor with a limit override (5/hour) and a value of
           its own of about --value-bytes bytes for key `user`: one per-rule series per value,
           up to --max_rule_metric_series (10,000)
  quiet    phase A (--quiet-runs times): sluice-bench in open loop (--rate, --duration, domain
           `bench`, key `key`, --keyspace values, so new values keep coming); meanwhile a
           GET /healthcheck every --health-interval on a fresh connection, each timed on its own
           thread (a stalled check does not delay the next), and sluice's VmRSS/VmHWM sampled
  attack   phase B: --stalled connections to each listener (the HTTP port's /metrics and
           --prometheus_address's) send GET /metrics and never read; --readers-http and
           --readers-prom scrapers loop GET /metrics on each, reading every page whole; after
           --settle seconds, the same sluice-bench run and sampling as phase A

It prints one table: per binary and phase, decisions (requests/s, p50/p99/max, errors), health
checks (p50/p99/max, unanswered), sluice's peak VmRSS over the phase and its VmHWM at the end,
its CPU, this driver's (the script's threads, the scrapers' included, and sluice-bench's), the
CPU the rest of the machine used meanwhile, and in phase B the scrapes (pages read,
page size, scrape time, distinct pages seen: a lower bound on the pages rendered, since a page
shows fresh counters each time it is rendered) and the stalled connections the server cut.

Robust against a server that blows up: every socket has a timeout, a phase lasts at most
--phase-cap seconds, and a phase in which sluice's VmRSS passes --rss-cap-mb is stopped (the
server killed) and reported as such; every process started is stopped at the end. Only the
standard library is used; only 127.0.0.1 is contacted.

    python3 bench/metrics_flood.py [--build-dir=build] [--sluice=PATH ...] [--json-out=FILE]
"""

import argparse
import hashlib
import json
import os
import resource
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (bench/run.py: Children, free_port, wait_for_port, /proc)

HOST = bench.HOST
MB = 1 << 20
TCP_ESTABLISHED = 1

FLOOD_YAML = """\
# bench/metrics_flood.py: the flood's domain. Each request overrides the limit, which makes a
# per-rule series per value.
domain: flood
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
"""

BENCH_YAML = """\
# bench/metrics_flood.py: the decisions measured. detailed_metric: each value its own series
# (while the cap leaves room), so decisions may create series while a page is rendered.
domain: bench
descriptors:
  - key: key
    detailed_metric: true
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000, burst: 1000}
"""


def log(msg):
    bench.log(f"metrics_flood: {msg}")


# ---------------------------------------------------------------------------------------------
# HTTP/1.1 over raw sockets (a stalled scraper must be able to send and never read)


class Stopped(Exception):
    pass


def read_answer(sock, deadline, stop=None):
    """Reads one HTTP/1.1 answer (Content-Length, chunked, or up to EOF) by `deadline`
    (time.monotonic()). Returns (status, body: bytes or bytearray). Raises TimeoutError past the
    deadline, Stopped once `stop` (a threading.Event) is set, ConnectionError on an early EOF."""
    buf = bytearray()

    def wait_readable():
        while True:
            if stop is not None and stop.is_set():
                raise Stopped()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole answer in time")
            sock.settimeout(min(left, 0.25))
            return

    def more():
        while True:
            wait_readable()
            try:
                return sock.recv(1 << 20)
            except socket.timeout:
                continue

    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            break
        data = more()
        if not data:
            raise ConnectionError("closed before the answer's head")
        buf += data
    head = bytes(buf[:end]).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = buf[end + 4:]
    if "content-length" in headers:
        # Pages run to megabytes: read straight into one buffer (no copy in this process, whose
        # CPU competes with the server's on a small machine).
        length = int(headers["content-length"])
        out = bytearray(length)
        view = memoryview(out)
        got = min(len(body), length)
        view[:got] = body[:got]
        while got < length:
            wait_readable()
            try:
                n = sock.recv_into(view[got:])
            except socket.timeout:
                continue
            if n == 0:
                raise ConnectionError("closed within the body")
            got += n
        view.release()
        return status, out
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while not body.endswith(b"0\r\n\r\n"):
            data = more()
            if not data:
                raise ConnectionError("closed within the chunked body")
            body += data
        out, at = bytearray(), 0
        while True:
            line_end = body.index(b"\r\n", at)
            size = int(bytes(body[at:line_end]).split(b";")[0], 16)
            if size == 0:
                return status, bytes(out)
            out += body[line_end + 2:line_end + 2 + size]
            at = line_end + 2 + size + 2
    while True:  # neither: the body runs to EOF
        data = more()
        if not data:
            return status, bytes(body)
        body += data


def timed_get(port, path, timeout, stop=None):
    """GET `path` on a fresh connection. Returns (seconds, status or None, body or error)."""
    start = time.monotonic()
    deadline = start + timeout
    try:
        # A listener that stopped accepting leaves a connect waiting in its backlog: bounded.
        with socket.create_connection((HOST, port), timeout=min(timeout, 5)) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            status, body = read_answer(s, deadline, stop)
        return time.monotonic() - start, status, body
    except (OSError, TimeoutError, ValueError, IndexError, Stopped) as e:
        return time.monotonic() - start, None, f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------
# /proc


def proc_status_kb(pid, field):
    """A /proc/PID/status field in kB, or None (the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def task_cpu_seconds(pid):
    """{tid: (name, utime + stime seconds)} of a process's threads (sluice names few of its
    threads, so they are told apart by id)."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            out[tid] = (name, bench.stat_cpu_seconds(f"/proc/{pid}/task/{tid}/stat"))
        except OSError:
            continue  # ended meanwhile
    return out


def own_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------
# The server


def write_config(workdir):
    config_dir = os.path.join(workdir, "config")
    os.makedirs(config_dir, exist_ok=True)
    for name, text in (("flood.yaml", FLOOD_YAML), ("bench.yaml", BENCH_YAML)):
        with open(os.path.join(config_dir, name), "w") as f:
            f.write(text)
    return config_dir


class Server:
    """One sluice process under test and its three ports."""

    def __init__(self, children, binary, name, config_dir, extra_flags):
        self.children = children
        self.name = name
        self.grpc_port, self.http_port, self.prom_port = (bench.free_port() for _ in range(3))
        argv = [binary, f"--config={config_dir}", "--backend=memory",
                f"--grpc_address={HOST}:{self.grpc_port}",
                f"--http_address={HOST}:{self.http_port}",
                f"--prometheus_address={HOST}:{self.prom_port}",
                "--log_level=warning", "--config_poll_interval=0", *extra_flags]
        self.proc = children.start(name, argv)
        for port in (self.grpc_port, self.http_port, self.prom_port):
            bench.wait_for_port(port, self.proc, name, children)
        deadline = time.monotonic() + 15
        while timed_get(self.http_port, "/readyz", 2)[1] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"{name} not ready:\n{children.log_tail(name)}")
            time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def death(self):
        code = self.proc.poll()
        if code is None:
            return None
        return f"signal {-code}" if code < 0 else f"exit status {code}"

    def stop(self):
        self.children.stop(self.proc, timeout=10)


def flood(server, opts):
    """The report's flood. Returns {seconds, requests answered 200}."""
    start = time.monotonic()
    ok = 0
    with socket.create_connection((HOST, server.http_port), timeout=10) as s:
        for r in range(opts.flood_requests):
            parts = []
            for d in range(opts.flood_descriptors):
                prefix = f"{r}_{d}_"
                value = prefix + "v" * max(1, opts.value_bytes - len(prefix))
                parts.append('{"entries":[{"key":"user","value":"%s"}],'
                             '"limit":{"requests_per_unit":5,"unit":"HOUR"}}' % value)
            body = ('{"domain":"flood","descriptors":[' + ",".join(parts) + "]}").encode()
            s.sendall(b"POST /json HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % (HOST.encode(), len(body)) + body)
            status, answer = read_answer(s, time.monotonic() + 30)
            if status != 200:
                raise RuntimeError(f"flood request {r} answered {status}: {answer[:200]!r}")
            ok += 1
    return {"seconds": time.monotonic() - start, "requests_ok": ok,
            "values": opts.flood_requests * opts.flood_descriptors}


# ---------------------------------------------------------------------------------------------
# Load and probes


class HealthSampler:
    """GET /healthcheck every `interval` on a fresh connection, each on a thread of its own, so a
    check that hangs does not hold up the next (open loop: a stall shows in every check it
    covers). A check unanswered within `timeout` counts as unanswered with the timeout as its
    latency (a lower bound)."""

    def __init__(self, port, interval, timeout, max_in_flight=400):
        self.port = port
        self.interval = interval
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.results = []  # (seconds, ok)
        self.skipped = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.workers = []
        self.thread = threading.Thread(target=self._schedule, daemon=True)

    def start(self):
        self.thread.start()

    def _check(self):
        seconds, status, body = timed_get(self.port, "/healthcheck", self.timeout)
        with self.lock:
            self.results.append((seconds, status == 200))

    def _schedule(self):
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            self.workers = [w for w in self.workers if w.is_alive()]
            if len(self.workers) >= self.max_in_flight:
                self.skipped += 1
            else:
                w = threading.Thread(target=self._check, daemon=True)
                w.start()
                self.workers.append(w)
            next_at += self.interval
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))

    def stop(self):
        """Stops scheduling; waits for the checks in flight (at most their timeout)."""
        self.stop_event.set()
        self.thread.join()
        for w in self.workers:
            w.join(self.timeout + 1)
        with self.lock:
            return summarize_health(list(self.results), self.skipped)


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def summarize_health(results, skipped):
    latencies = [s * 1000 for s, _ in results]
    return {"checks": len(results), "unanswered": sum(1 for _, ok in results if not ok),
            "skipped": skipped,
            "p50_ms": percentile(latencies, 0.50), "p99_ms": percentile(latencies, 0.99),
            "max_ms": max(latencies) if latencies else None}


class StalledScrapers:
    """Connections that send GET /metrics and never read their answer."""

    def __init__(self, port, count, path="/metrics"):
        self.socks = []
        self.failed = 0
        for _ in range(count):
            try:
                s = socket.create_connection((HOST, port), timeout=2)
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
                self.socks.append(s)
            except OSError:
                self.failed += 1

    def state(self):
        """{open, cut (closed by the server), unread_mb (answer bytes in our receive buffers)}."""
        still, cut, unread = 0, 0, 0
        for s in self.socks:
            try:
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
                unread += socket_unread_bytes(s)
            except OSError:
                cut += 1
                continue
            if info[0] == TCP_ESTABLISHED:
                still += 1
            else:
                cut += 1
        return {"opened": len(self.socks), "failed": self.failed, "still_open": still,
                "cut_by_server": cut, "unread_mb": unread / MB}

    def close(self):
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.socks = []


def socket_unread_bytes(s):
    import fcntl
    import termios
    buf = struct.pack("i", 0)
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, buf))[0]


class ReadingScraper:
    """A scraper that loops GET /metrics on a fresh connection and reads each page whole."""

    def __init__(self, port, timeout, stop_event, pause=0.0, path="/metrics"):
        self.port = port
        self.pause = pause
        self.timeout = timeout
        self.stop_event = stop_event
        self.path = path
        self.scrapes = []  # (seconds, bytes)
        self.failures = []
        self.digests = set()
        self.last_page = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        # Lists only grow (append is atomic), so another thread may summarize them meanwhile.
        while not self.stop_event.is_set():
            seconds, status, body = timed_get(self.port, self.path, self.timeout, self.stop_event)
            if self.stop_event.is_set():
                return
            if status == 200:
                self.scrapes.append((seconds, len(body)))
                self.digests.add(page_digest(body))
                self.last_page = body
                if self.pause:
                    self.stop_event.wait(self.pause)
            else:
                self.failures.append(body if status is None else f"status {status}")
                self.stop_event.wait(0.1)


def page_digest(body):
    """What tells one rendered page from another: the HTTP port adds its connection gauges to
    a shared page as it sends it, so only what comes before them is hashed (the counters there
    move between renders: decisions, requests)."""
    cut = body.find(b"sluice_http_connections")
    return hashlib.blake2b(body if cut < 0 else body[:cut], digest_size=16).digest()


def summarize_scrapers(scrapers):
    times = [s for r in scrapers for s, _ in r.scrapes]
    sizes = [b for r in scrapers for _, b in r.scrapes]
    digests = set()
    for r in scrapers:
        digests |= r.digests.copy()  # one C call: atomic under the GIL
    failures = [f for r in scrapers for f in r.failures]
    last = next((r.last_page for r in scrapers if r.last_page is not None), None)
    return {"scrapers": len(scrapers), "pages": len(times), "failed": len(failures),
            "failures_sample": failures[:3], "distinct_pages": len(digests),
            "page_mb_max": max(sizes) / MB if sizes else None,
            "page_mb_min": min(sizes) / MB if sizes else None,
            "scrape_s_p50": percentile(times, 0.5), "scrape_s_max": max(times) if times else None,
            "gauges": page_gauges(last) if last is not None else {}}


def page_gauges(page):
    """A few unlabelled series of a page (those a binary has) and its per-rule series."""
    wanted = ("sluice_rule_series", "sluice_rule_keys_folded_total",
              "sluice_metrics_rule_series_left_out", "sluice_http_connections")
    out = {}
    for line in page.decode("utf-8", "replace").splitlines():
        if line.startswith(("sluice_rule_total_hits{",
                            "ratelimit_service_rate_limit_total_hits{")):
            out["total_hits_series"] = out.get("total_hits_series", 0) + 1
        elif line.startswith("sluice_http_connections_closed_total{"):
            out[line.split()[0]] = float(line.split()[-1])
        else:
            name = line.split(" ", 1)[0]
            if name in wanted:
                out[name] = float(line.split()[-1])
    return out


# ---------------------------------------------------------------------------------------------
# A phase


def run_phase(children, server, opts, name, attack=False):
    """One sluice-bench run with health and memory sampling (and in phase B, the attack)."""
    log(f"{server.name}: phase {name}")
    result = {"phase": name, "aborted": None}
    stop_readers = threading.Event()
    stalled, readers = {}, {"http": [], "prom": []}
    busy0, cpu0 = bench.machine_busy_seconds(), bench.proc_cpu_seconds(server.pid)
    own0, children0 = own_cpu_seconds(), bench.children_cpu_seconds()
    threads0 = task_cpu_seconds(server.pid)
    t0 = time.monotonic()
    rss_peak_kb = proc_status_kb(server.pid, "VmRSS") or 0
    bench_proc = None
    health = None

    def sample_rss():
        nonlocal rss_peak_kb
        rss = proc_status_kb(server.pid, "VmRSS")
        if rss is not None:
            rss_peak_kb = max(rss_peak_kb, rss)
            if rss > opts.rss_cap_mb * 1024 and result["aborted"] is None:
                result["aborted"] = f"VmRSS {rss // 1024} MB passed --rss-cap-mb"
        if not server.alive() and result["aborted"] is None:
            result["aborted"] = f"sluice died ({server.death()})"
        if time.monotonic() - t0 > opts.phase_cap and result["aborted"] is None:
            result["aborted"] = f"phase passed --phase-cap ({opts.phase_cap:g} s)"
        return result["aborted"] is None

    try:
        if attack:
            for key, port in (("http", server.http_port), ("prom", server.prom_port)):
                stalled[key] = StalledScrapers(port, opts.stalled)
            for key, port, n in (("http", server.http_port, opts.readers_http),
                                 ("prom", server.prom_port, opts.readers_prom)):
                readers[key] = [ReadingScraper(port, opts.scrape_timeout, stop_readers,
                                               opts.reader_pause) for _ in range(n)]
            settle_end = time.monotonic() + opts.settle
            while time.monotonic() < settle_end and sample_rss():
                time.sleep(0.1)
        if result["aborted"] is None:
            health = HealthSampler(server.http_port, opts.health_interval, opts.health_timeout)
            health.start()
            argv = [os.path.join(opts.build_bin, "sluice-bench"),
                    f"--server={HOST}:{server.grpc_port}", "--domain=bench", "--key=key",
                    f"--keyspace={opts.keyspace}", f"--rate={opts.rate:g}",
                    f"--concurrency={opts.open_concurrency}", f"--duration={opts.duration:g}",
                    f"--warmup={opts.warmup:g}", f"--timeout={opts.call_timeout:g}",
                    f"--seed={opts.seed_counter}", "--json"]
            opts.seed_counter += 1  # new values in every run
            with open(os.path.join(opts.workdir, "sluice-bench.log"), "ab") as bench_log:
                bench_proc = children.start("sluice-bench", argv, stdout=subprocess.PIPE,
                                            stderr=bench_log, text=True)
            while bench_proc.poll() is None and sample_rss():
                time.sleep(0.1)
            if bench_proc.poll() is None:  # aborted
                bench_proc.kill()
                bench_proc.wait()
            else:
                out = bench_proc.stdout.read()
                if bench_proc.returncode == 0:
                    try:
                        result["decisions"] = json.loads(out)
                    except ValueError:
                        result["bench_error"] = f"unreadable output: {out[:200]!r}"
                else:
                    result["bench_error"] = f"sluice-bench exited {bench_proc.returncode}"
            children.forget(bench_proc)
        if result["aborted"] and result["aborted"].startswith("VmRSS") and server.alive():
            log(f"{server.name}: {result['aborted']}: killing it")
            server.proc.kill()
            server.proc.wait()
    finally:
        if bench_proc is not None and bench_proc.poll() is None:
            bench_proc.kill()
            bench_proc.wait()
            children.forget(bench_proc)
        result["seconds"] = time.monotonic() - t0
        result["server_cpu_s"] = (bench.proc_cpu_seconds(server.pid) - cpu0
                                  if server.alive() else None)
        if server.alive():
            # CPU seconds by thread: who did the work.
            result["server_thread_cpu_s"] = {
                f"{name}/{tid}": round(cpu - threads0.get(tid, (name, 0.0))[1], 2)
                for tid, (name, cpu) in task_cpu_seconds(server.pid).items()
                if cpu - threads0.get(tid, (name, 0.0))[1] >= 0.05}
        result["vmhwm_mb"] = (proc_status_kb(server.pid, "VmHWM") or 0) / 1024 \
            if server.alive() else None
        result["rss_peak_mb"] = rss_peak_kb / 1024
        # The driver: this script (its scrapers' and health checks' threads, the kernel's copying
        # of the pages they read included) and sluice-bench (waited for: a child's CPU).
        # Others: what the rest of the machine used meanwhile (other tenants, steal): noise.
        # All over the same interval, up to sluice-bench's end.
        result["script_cpu_s"] = own_cpu_seconds() - own0
        result["driver_cpu_s"] = result["script_cpu_s"] + bench.children_cpu_seconds() - children0
        busy = bench.machine_busy_seconds() - busy0
        ours = (result["server_cpu_s"] or 0) + result["driver_cpu_s"]
        result["others_cores"] = max(0.0, (busy - ours) / max(result["seconds"], 1e-9))
        if attack:
            result["stalled"] = {k: v.state() for k, v in stalled.items()}
            result["scrapes"] = {k: summarize_scrapers(v) for k, v in readers.items()}
        # The attack goes on while the checks still in flight finish (up to their timeout):
        # stopping it first would answer them sooner than the attack allows.
        if health is not None:
            result["health"] = health.stop()
        stop_readers.set()
        for group in readers.values():
            for r in group:
                r.thread.join(2)
        for v in stalled.values():
            v.close()
    return result


def measure_binary(children, binary, label, config_dir, opts):
    out = {"binary": binary, "label": label, "phases": []}
    log(f"{label}: starting {binary}")
    name = "sluice-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in label)
    server = Server(children, binary, name, config_dir, opts.sluice_flags)
    try:
        rss0 = proc_status_kb(server.pid, "VmRSS")
        log(f"{label}: flood ({opts.flood_requests} x {opts.flood_descriptors} values)")
        out["flood"] = flood(server, opts)
        out["flood"]["rss_before_mb"] = (rss0 or 0) / 1024
        out["flood"]["rss_after_mb"] = (proc_status_kb(server.pid, "VmRSS") or 0) / 1024
        phases = [f"A{i + 1}" if opts.quiet_runs > 1 else "A" for i in range(opts.quiet_runs)]
        for name in phases + ["B"]:
            out["phases"].append(run_phase(children, server, opts, name, attack=(name == "B")))
            if not server.alive():
                break
    finally:
        out["died"] = server.death()
        server.stop()
    return out


# ---------------------------------------------------------------------------------------------
# The table


def fmt(value, spec="", none="-"):
    return none if value is None else format(value, spec)


def pair(a, b):
    return f"{a}/{b}"


def table(runs):
    header = ["binary", "phase", "dec/s", "dec p50", "dec p99", "dec max", "dec err",
              "health", "health p50", "health p99", "health max", "health",
              "VmRSS peak", "VmHWM", "sluice", "driver", "others", "pages read", "page MB",
              "scrape s", "scrape s", "distinct", "stalled cut"]
    header2 = ["", "", "", "ms", "ms", "ms", "/unsent", "checks", "ms", "ms", "ms",
               "unanswered", "MB", "MB", "CPU s", "CPU s", "cores", "http/prom", "http/prom",
               "p50 http/prom", "max http/prom", "pages h/p", "http/prom"]
    lines = []
    for run in runs:
        for p in run["phases"]:
            d = p.get("decisions") or {}
            lat = d.get("latency_ms", {})
            h = p.get("health") or {}
            sc = p.get("scrapes") or {}
            st = p.get("stalled") or {}

            def both(fn, spec):
                if not sc:
                    return ""
                return pair(fmt(fn(sc["http"]), spec), fmt(fn(sc["prom"]), spec))

            lines.append([
                run["label"], p["phase"] + (" (aborted)" if p["aborted"] else ""),
                fmt(d.get("rps"), ",.0f"),
                fmt(lat.get("p50"), ".2f"), fmt(lat.get("p99"), ".2f"),
                fmt(lat.get("max"), ".1f"),
                pair(fmt(d.get("errors")), fmt(d.get("unsent"))) if d else "-",
                fmt(h.get("checks")), fmt(h.get("p50_ms"), ".1f"), fmt(h.get("p99_ms"), ".1f"),
                fmt(h.get("max_ms"), ".1f"), fmt(h.get("unanswered")),
                fmt(p.get("rss_peak_mb"), ",.0f"), fmt(p.get("vmhwm_mb"), ",.0f"),
                fmt(p.get("server_cpu_s"), ".1f"), fmt(p.get("driver_cpu_s"), ".1f"),
                fmt(p.get("others_cores"), ".2f"),
                both(lambda s: s["pages"], ""),
                both(lambda s: s["page_mb_max"], ".1f"),
                both(lambda s: s["scrape_s_p50"], ".2f"),
                both(lambda s: s["scrape_s_max"], ".2f"),
                both(lambda s: s["distinct_pages"], ""),
                pair(st["http"]["cut_by_server"], st["prom"]["cut_by_server"]) if st else "",
            ])
    widths = [max(len(x[i]) for x in [header, header2] + lines) for i in range(len(header))]

    def render(cells):
        return "  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i])
                         for i, c in enumerate(cells))

    out = [render(header), render(header2), "  ".join("-" * w for w in widths)]
    out += [render(line) for line in lines]
    return "\n".join(out)


def notes(runs, opts):
    out = []
    for run in runs:
        f = run.get("flood")
        if f:
            out.append(f"{run['label']}: flood of {f['values']:,} values in {f['seconds']:.1f} s "
                       f"({f['requests_ok']} requests answered 200); VmRSS {f['rss_before_mb']:.0f}"
                       f" -> {f['rss_after_mb']:.0f} MB")
        for p in run["phases"]:
            tag = f"{run['label']} {p['phase']}"
            if p["aborted"]:
                out.append(f"{tag}: ABORTED: {p['aborted']}")
            if p.get("bench_error"):
                out.append(f"{tag}: {p['bench_error']}")
            d = p.get("decisions") or {}
            if d.get("errors"):
                out.append(f"{tag}: {d['errors']} decision errors {d.get('errors_by_code')}")
            if d.get("unsent"):
                out.append(f"{tag}: {d['unsent']} decisions never sent in time (counted in "
                           f"latency as lower bounds)")
            busiest = sorted((p.get("server_thread_cpu_s") or {}).items(), key=lambda kv: -kv[1])
            if busiest:
                out.append(f"{tag}: sluice CPU s by thread: " +
                           ", ".join(f"{k} {v:.1f}" for k, v in busiest[:6]))
            h = p.get("health") or {}
            if h.get("unanswered"):
                out.append(f"{tag}: {h['unanswered']} of {h['checks']} health checks unanswered "
                           f"within {opts.health_timeout:g} s (counted at their timeout)")
            if h.get("skipped"):
                out.append(f"{tag}: {h['skipped']} health checks not sent (too many in flight)")
            for key, st in (p.get("stalled") or {}).items():
                out.append(f"{tag}: stalled on {key}: {st['opened']} opened ({st['failed']} "
                           f"failed to connect), {st['cut_by_server']} cut by the server, "
                           f"{st['unread_mb']:.1f} MB of answers unread in our buffers")
            for key, sc in (p.get("scrapes") or {}).items():
                g = sc.get("gauges", {})
                if sc["failed"]:
                    out.append(f"{tag}: {sc['failed']} scrapes on {key} failed, e.g. "
                               f"{sc['failures_sample']}")
                if g:
                    shown = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(g.items()))
                    out.append(f"{tag}: last {key} page: {shown}")
        if run.get("died"):
            out.append(f"{run['label']}: sluice ended with {run['died']} before it was stopped")
    return out


# ---------------------------------------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(
        prog="bench/metrics_flood.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(bench.REPO, "build"),
                   help="where bin/sluice-bench (and the default bin/sluice) are")
    p.add_argument("--sluice", action="append", default=[],
                   help="a sluice binary to measure (repeat for a before/after in one run; "
                        "default: BUILD_DIR/bin/sluice)")
    p.add_argument("--label", action="append", default=[],
                   help="a name per --sluice for the table (default: its build's parent dir)")
    p.add_argument("--sluice-args", default="",
                   help="extra sluice flags for every binary, e.g. "
                        "'--max_rule_metric_series=40000'")
    p.add_argument("--flood-requests", type=int, default=170)
    p.add_argument("--flood-descriptors", type=int, default=60)
    p.add_argument("--value-bytes", type=int, default=1000)
    p.add_argument("--rate", type=float, default=1000, help="sluice-bench's open-loop rate")
    p.add_argument("--duration", type=float, default=10, help="sluice-bench's measured seconds")
    p.add_argument("--warmup", type=float, default=1)
    p.add_argument("--keyspace", type=int, default=1_000_000,
                   help="values of key `key`: new values keep coming (sluice-bench makes every "
                        "value before it starts: 100M would take it seconds and gigabytes)")
    p.add_argument("--open-concurrency", type=int, default=1000,
                   help="sluice-bench's most calls in flight")
    p.add_argument("--call-timeout", type=float, default=5, help="sluice-bench's call deadline")
    p.add_argument("--quiet-runs", type=int, default=1, help="how many times to run phase A")
    p.add_argument("--stalled", type=int, default=40, help="non-reading scrapers per listener")
    p.add_argument("--readers-http", type=int, default=4)
    p.add_argument("--readers-prom", type=int, default=2)
    p.add_argument("--reader-pause", type=float, default=0,
                   help="seconds a reading scraper waits between its scrapes (0: back to back)")
    p.add_argument("--settle", type=float, default=2,
                   help="seconds between the attack's start and phase B's measuring")
    p.add_argument("--health-interval", type=float, default=0.1)
    p.add_argument("--health-timeout", type=float, default=30)
    p.add_argument("--scrape-timeout", type=float, default=60)
    p.add_argument("--phase-cap", type=float, default=None,
                   help="longest a phase may run, seconds (default: duration + warmup + settle "
                        "+ 30)")
    p.add_argument("--rss-cap-mb", type=float, default=3072,
                   help="a phase in which sluice's VmRSS passes this is stopped, sluice killed")
    p.add_argument("--json-out", help="also write every number to this file as JSON")
    p.add_argument("--workdir", help="config, logs (default: a new temp dir)")
    opts = p.parse_args()
    if opts.phase_cap is None:
        opts.phase_cap = opts.duration + opts.warmup + opts.settle + 30
    opts.build_bin = os.path.join(os.path.abspath(opts.build_dir), "bin")
    if not opts.sluice:
        opts.sluice = [os.path.join(opts.build_bin, "sluice")]
    opts.sluice = [os.path.abspath(s) for s in opts.sluice]
    if opts.label and len(opts.label) != len(opts.sluice):
        p.error("give one --label per --sluice, or none")
    if not opts.label:
        opts.label = [os.path.basename(os.path.dirname(os.path.dirname(os.path.dirname(s))))
                      or s for s in opts.sluice]
        if len(set(opts.label)) != len(opts.label):
            opts.label = [f"{i + 1}:{label}" for i, label in enumerate(opts.label)]
    for path in opts.sluice + [os.path.join(opts.build_bin, "sluice-bench")]:
        if not os.access(path, os.X_OK):
            p.error(f"{path} is missing or not executable")
    opts.sluice_flags = shlex.split(opts.sluice_args)
    opts.seed_counter = 1
    return opts


def main():
    opts = parse_args()
    if opts.workdir is None:
        opts.workdir = tempfile.mkdtemp(prefix="sluice-metrics-flood.")
    os.makedirs(opts.workdir, exist_ok=True)
    # Many threads wait on sockets here; a short switch interval keeps the GIL from adding
    # milliseconds to a health check's measured latency.
    sys.setswitchinterval(0.0005)

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, on_sigterm)
    children = bench.Children(os.path.join(opts.workdir, "pids"), opts.workdir)
    config_dir = write_config(opts.workdir)
    with open("/proc/loadavg") as f:
        load_start = f.read().split()[:3]
    started = time.time()
    runs, failed = [], []
    try:
        for binary, label in zip(opts.sluice, opts.label):
            try:
                runs.append(measure_binary(children, binary, label, config_dir, opts))
            except (RuntimeError, OSError, TimeoutError) as e:
                log(f"{label}: FAILED: {e}")
                failed.append({"label": label, "binary": binary, "reason": str(e)})
    finally:
        children.stop_all()
    with open("/proc/loadavg") as f:
        load_end = f.read().split()[:3]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "elapsed_s": round(time.time() - started, 1), "cpus": os.cpu_count(),
            "loadavg_start": load_start, "loadavg_end": load_end,
            "options": {k: v for k, v in vars(opts).items() if k not in ("seed_counter",)}}
    print(f"Sluice metrics flood (issue 41): {meta['date']}, {meta['cpus']} CPUs, load average "
          f"{' '.join(load_start)} -> {' '.join(load_end)}; flood {opts.flood_requests} x "
          f"{opts.flood_descriptors} values of {opts.value_bytes} B; sluice-bench open loop "
          f"{opts.rate:g}/s for {opts.duration:g} s; phase B: {opts.stalled} stalled scrapers per "
          f"listener, {opts.readers_http} + {opts.readers_prom} reading; loopback")
    print()
    print(table(runs))
    print()
    for line in notes(runs, opts):
        print(f"  {line}")
    for f in failed:
        print(f"  {f['label']}: FAILED: {f['reason'].strip()}")
    print(f"  logs: {opts.workdir}")
    if opts.json_out:
        with open(opts.json_out, "w") as f:
            json.dump({"meta": meta, "runs": runs, "failed": failed}, f, indent=2, default=str)
        log(f"wrote {opts.json_out}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
