#!/usr/bin/env python3
"""Takes a CPU away now and then, as a hypervisor takes a virtual CPU from a shared machine.

A SCHED_FIFO busy loop pinned to one CPU runs for BUSY_MS every PERIOD_MS, for SECONDS in all:
no ordinary thread runs on that CPU meanwhile. It reproduces the stalls that the chaos and
network-fault tests' probe (tests/support/host_stalls.h) must see, e.g. on both CPUs of 2:

  sudo tests/tools/steal_cpu.py 1 40 500 70 & sudo tests/tools/steal_cpu.py 0 30 700 70 &
  build/tests/chaos_test

Needs root (a real-time priority). Linux keeps 5% of each second for ordinary threads whatever
real-time threads do (kernel.sched_rt_runtime_us).
"""
import os
import sys
import time


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: steal_cpu.py CPU BUSY_MS PERIOD_MS SECONDS")
    cpu, busy_ms, period_ms, seconds = (int(sys.argv[1]), float(sys.argv[2]),
                                        float(sys.argv[3]), float(sys.argv[4]))
    if not 0 < busy_ms < period_ms:
        sys.exit("steal_cpu.py: need 0 < BUSY_MS < PERIOD_MS")
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        busy_until = time.monotonic() + busy_ms / 1000
        while time.monotonic() < busy_until:
            pass
        time.sleep((period_ms - busy_ms) / 1000)


if __name__ == "__main__":
    main()
