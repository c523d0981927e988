#!/usr/bin/env python3
"""Prints the median of each scenario's runs in bench/results.jsonl as a Markdown table.

For each label only the runs of the newest commit that has runs of it count (the file is in
run order), so older figures never mix into a row."""
import json
import statistics
import sys
from collections import defaultdict

path = sys.argv[1] if len(sys.argv) > 1 else "bench/results.jsonl"
runs = defaultdict(list)
with open(path) as f:
    for line in f:
        r = json.loads(line)
        rs = runs[r["label"]]
        if rs and rs[-1].get("commit") != r.get("commit"):
            rs.clear()
        rs.append(r)

cols = [("pushed_per_s", "pushed msg/s", 0), ("consumed_per_s", "consumed msg/s", 0),
        ("txns_per_s", "txn/s", 0), ("push_p50_ms", "push p50 ms", 1),
        ("push_p99_ms", "push p99 ms", 1), ("push_p999_ms", "push p99.9 ms", 1),
        ("e2e_p50_ms", "e2e p50 ms", 1), ("e2e_p99_ms", "e2e p99 ms", 1),
        ("txn_p99_ms", "txn p99 ms", 1), ("fill_s", "fill s", 1),
        ("server_cpu_s", "server CPU s", 1),
        ("server_peak_rss_mb", "peak RSS MiB", 0)]
print("| scenario | runs | " + " | ".join(c[1] for c in cols) + " | commit |")
print("|---|---|" + "---|" * len(cols) + "---|")
for label, rs in runs.items():
    cells = []
    for key, _, digits in cols:
        cells.append(f"{statistics.median(r.get(key, 0) for r in rs):.{digits}f}")
    commits = ",".join(sorted({r.get("commit", "?") for r in rs}))
    print(f"| {label} | {len(rs)} | " + " | ".join(cells) + f" | {commits} |")
