#!/usr/bin/env python3
"""Adds the backlog-50m figures to queen-bench's result line and prints it, then a human
summary on stderr.
    bench/backlog_summary.py LINE RSS_BEFORE_KB RSS_AFTER_KB PSS_PEAK_KB RESTART_NS
                             RSS_RESTARTED_KB FRESH_START_NS AFTER_LINE STOP_NS
                             RESTART_PEAK_KB RING_BYTES
AFTER_LINE is queen-bench's line for the first pushes after the restart (each partition's
dedup ring is built then, from the hashes in its message records). STOP_NS: how long the
SIGTERM before the restart took; RESTART_PEAK_KB: the node's peak RSS (VmHWM) once it
answered /health after the restart; RING_BYTES: queen_dedup_ring_bytes after the push."""
import json
import sys


def main():
    r = json.loads(sys.argv[1])
    before, after, peak = (int(v) for v in sys.argv[2:5])
    restart_s = int(sys.argv[5]) / 1e9
    restarted = int(sys.argv[6])
    fresh_start_s = int(sys.argv[7]) / 1e9
    first = json.loads(sys.argv[8])
    stop_s = int(sys.argv[9]) / 1e9
    restart_peak = int(sys.argv[10])
    ring_bytes = float(sys.argv[11])
    retained = round(r["pushed_per_s"] * r["seconds"])
    r.update(
        retained_messages=retained,
        rss_before_mb=before / 1024,
        rss_after_mb=after / 1024,
        rss_bytes_per_message=(after - before) * 1024 / max(retained, 1),
        pss_peak_with_copies_mb=peak / 1024,
        restart_s=restart_s,
        fresh_start_s=fresh_start_s,
        rss_restarted_mb=restarted / 1024,
        stop_s=stop_s,
        restart_peak_rss_mb=restart_peak / 1024,
        ring_mb=ring_bytes / 2**20,
        ring_bytes_per_message=ring_bytes / max(retained, 1),
        after_restart_pushed_per_s=first["pushed_per_s"],
        after_restart_push_p99_ms=first["push_p99_ms"],
        after_restart_push_p999_ms=first["push_p999_ms"],
    )
    print(json.dumps(r), flush=True)
    print(
        f"backlog: {retained} messages retained at {r['pushed_per_s']:.0f} msg/s; RSS "
        f"{before / 1024:.0f} -> {after / 1024:.0f} MiB, "
        f"{r['rss_bytes_per_message']:.1f} B per retained message (dedup rings "
        f"{ring_bytes / 2**20:.0f} MiB, {r['ring_bytes_per_message']:.1f} B a message); "
        f"peak Pss with checkpoint copies {peak / 1024:.0f} MiB; stop {stop_s:.2f} s; "
        f"restart {restart_s:.2f} s to /health (an empty node: {fresh_start_s:.2f} s), "
        f"RSS then {restarted / 1024:.0f} MiB "
        f"(peak {restart_peak / 1024:.0f} MiB); the first "
        f"{round(first['pushed_per_s'] * first['seconds'])} pushed after it at "
        f"{first['pushed_per_s']:.0f} msg/s, p99 {first['push_p99_ms']:.1f} ms, "
        f"p99.9 {first['push_p999_ms']:.1f} ms",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
