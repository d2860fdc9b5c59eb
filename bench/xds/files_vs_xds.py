#!/usr/bin/env python3
"""Decisions with the rules from files vs from an xDS management server, in one run.

bench/cost's memory_1 and memory_5 workloads (sequential gRPC requests, instructions per request
under callgrind, the least of three repeats) against two memory-backend servers: one loading
bench/config/ (--config), one taking the same `cost` domain from sluice-fake-ads
(--config_source=xds, bench/xds/cost.txtpb). The request path reads the same immutable Config
whichever source filled the store, so the two should count alike, within bench/cost's noise.

    ./scripts/build sluice sluice-cost-client sluice-fake-ads
    python3 bench/xds/files_vs_xds.py [--build-dir=build]
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import cost  # noqa: E402  (bench/cost.py: Callgrind, measure)
import run as bench  # noqa: E402  (bench/run.py: Children, free_port, wait_for_port)

SCENARIOS = ("memory_1", "memory_5")


class Opts:
    warmup = 200
    requests = 1000
    repeat = 3


def start_sluice(children, build_bin, workdir, xds_port):
    grpc_port, http_port = bench.free_port(), bench.free_port()
    argv = [os.path.join(build_bin, "sluice"), "--backend=memory",
            f"--grpc_address={cost.HOST}:{grpc_port}", f"--http_address={cost.HOST}:{http_port}",
            "--log_level=warning", "--config_poll_interval=0"]
    if xds_port:
        argv += ["--config_source=xds", f"--xds_server={cost.HOST}:{xds_port}"]
    else:
        argv += [f"--config={os.path.join(cost.REPO, 'bench', 'config')}"]
    name = "xds" if xds_port else "files"
    server = cost.Callgrind(children, name, argv, workdir)
    # Without --force_start_without_initial_config, an xDS server listens once configured.
    bench.wait_for_port(grpc_port, server.proc, name, children, timeout=180)
    server.grpc_port, server.http_port = grpc_port, http_port
    return server


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default=os.path.join(cost.REPO, "build"))
    opts = p.parse_args()
    build_bin = os.path.join(os.path.abspath(opts.build_dir), "bin")
    workdir = tempfile.mkdtemp(prefix="sluice-xds-cost.")
    children = bench.Children(os.path.join(workdir, "pids"), workdir)
    totals = {}
    try:
        xds_port = bench.free_port()
        children.start("fake-ads", [
            os.path.join(build_bin, "sluice-fake-ads"), f"--port={xds_port}",
            "--snapshot=" + os.path.join(cost.REPO, "bench", "xds", "cost.txtpb")])
        time.sleep(1)
        for source, port in (("files", None), ("xds", xds_port)):
            server = start_sluice(children, build_bin, workdir, port)
            for name in SCENARIOS:
                totals[(source, name)] = cost.measure(Opts, build_bin, server, name, None)["total"]
            children.stop(server.proc, timeout=30)
    finally:
        children.stop_all()
    print("scenario       files      xds   change   (instructions per request)")
    for name in SCENARIOS:
        files, xds = totals[("files", name)], totals[("xds", name)]
        print(f"{name:<12} {files / 1000:6.1f}k {xds / 1000:7.1f}k  {(xds / files - 1) * 100:+6.2f}%")


if __name__ == "__main__":
    main()
