#!/usr/bin/env python3
"""Instructions redis-server spends per EVALSHA of a composed Lua script, counted by callgrind.

  python3 bench/lua_cost.py [--build-dir=build] [--algorithm=token_bucket] [--calls=20000]
                            [--charge=0|1] [--record-doubles=6]

Starts redis-server under `valgrind --tool=callgrind --toggle-collect=evalShaCommand` on a free
loopback port, loads <build-dir>/gen/lua/<algorithm>.lua, sends --calls pipelined EVALSHAs of the
packed binary argument Sluice sends (now, limit 100, period 1 s, burst 100, hits 1, then the
charge when --record-doubles is 6; 40-byte records, --record-doubles=5, are what builds before
the charge field took), each on a new key, and prints the instructions counted inside
evalShaCommand per call. Counted, not timed: the figure moves by about 0.2% between runs (the
hash tables' and the allocator's state), so a change of a few hundred instructions shows.
Only the standard library and valgrind are used.
"""
import argparse
import os
import re
import socket
import struct
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    line = f.readline()
    kind = line[:1]
    if kind == b"$":
        n = int(line[1:])
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [read_reply(f) for _ in range(int(line[1:]))]
    if kind == b"-":
        raise RuntimeError(line.decode().strip())
    return line.strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--algorithm", default="token_bucket")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--charge", type=int, default=0, choices=(0, 1))
    parser.add_argument("--record-doubles", type=int, default=6, choices=(5, 6))
    args = parser.parse_args()

    script = open(os.path.join(args.build_dir, "gen", "lua", args.algorithm + ".lua"), "rb").read()
    work = tempfile.mkdtemp(prefix="lua_cost.")
    out = os.path.join(work, "callgrind.out")
    port = free_port()
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--toggle-collect=evalShaCommand",
         "--callgrind-out-file=" + out, "redis-server", "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", work],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("redis-server under valgrind did not start")
        reader = conn.makefile("rb")
        conn.sendall(command("SCRIPT", "LOAD", script))
        sha = read_reply(reader).decode()
        now = 1700006400000000
        pending = b""
        for i in range(args.calls):
            values = [now + i, 100, 1000000, 100, 1]
            if args.record_doubles == 6:
                values.append(args.charge)
            packed = struct.pack("<%dd" % len(values), *map(float, values))
            pending += command("EVALSHA", sha, 1, "k%d" % i, packed)
            if len(pending) > (1 << 20):
                conn.sendall(pending)
                pending = b""
        conn.sendall(pending)
        for _ in range(args.calls):
            read_reply(reader)
        conn.sendall(command("SHUTDOWN", "NOSAVE"))
        server.wait(timeout=120)
    finally:
        if server.poll() is None:
            server.kill()
    annotated = subprocess.run(["callgrind_annotate", out], capture_output=True,
                               text=True).stdout
    total = int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", annotated)
                .group(1).replace(",", ""))
    print("%s: %.0f instructions per EVALSHA (%d calls, charge %d, %d-byte records)" %
          (args.algorithm, total / args.calls, args.calls, args.charge, 8 * args.record_doubles))


if __name__ == "__main__":
    main()
