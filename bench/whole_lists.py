#!/usr/bin/env python3
"""Times whole lists of partitions against a running node, and what they cost other requests.

  bench/whole_lists.py PORT PATH...

A second connection asks GET /api/v1/resources/queues (a small read that goes through the node
thread) in a loop the whole time; for each PATH, asked in turn on a fresh connection, it prints
the answer's status, size and time, and the p99 and max latency of the small reads answered
while it was being read. E.g. after `queen-bench --scenario push --fill 1 --partitions 1000000`
and one pop of group g: PATHs /api/v1/consumer-groups/g, /api/v1/resources/queues/bench,
"/api/v1/consumer-groups/lagging?minLagSeconds=0".
"""
import http.client
import sys
import threading
import time


def main():
    port = int(sys.argv[1])
    paths = sys.argv[2:]
    stop = threading.Event()
    latencies = []  # (answered at, seconds)

    def small_reads():
        c = http.client.HTTPConnection("127.0.0.1", port)
        while not stop.is_set():
            t = time.perf_counter()
            c.request("GET", "/api/v1/resources/queues")
            c.getresponse().read()
            latencies.append((time.perf_counter(), time.perf_counter() - t))

    loop = threading.Thread(target=small_reads)
    loop.start()
    time.sleep(1.0)
    for path in paths:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.perf_counter()
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        t1 = time.perf_counter()
        during = sorted(s for (at, s) in latencies if t0 <= at <= t1 + 0.001)
        n = len(during)
        p99 = during[int(n * 0.99)] * 1000 if n else float("nan")
        top = during[-1] * 1000 if n else float("nan")
        print(f"{path}: {r.status} {len(body) / 1e6:.1f} MB in {t1 - t0:.2f} s; small reads "
              f"during it: {n}, p99 {p99:.1f} ms, max {top:.1f} ms", flush=True)
        time.sleep(0.5)
    stop.set()
    loop.join()


if __name__ == "__main__":
    main()
