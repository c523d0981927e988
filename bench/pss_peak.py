#!/usr/bin/env python3
"""Samples the Pss of a process and its children (the node and its forked checkpoint
copies) every 0.5 s until SIGINT, then prints the largest sum seen, in KiB.
    bench/pss_peak.py PID"""
import os
import signal
import sys
import time


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def main():
    pid = int(sys.argv[1])
    peak = 0
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    while not stop:
        peak = max(peak, pss_kb(pid) + sum(pss_kb(c) for c in children(pid)))
        time.sleep(0.5)  # the sampling period, not a wait for a condition
    print(peak)


if __name__ == "__main__":
    main()
