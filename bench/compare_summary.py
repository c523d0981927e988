"""Summarizes bench/compare.sh: queen-bench result lines (JSON, one per run, with "target"
(queen, and redis or base) and "round") on stdin; prints each run, the medians per target and
their ratio."""
import json
import statistics
import sys


def main():
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    inout = rows[0]["consumers"] > 0
    keys = [("pushed_per_s", "push msg/s")]
    if inout:
        keys += [("consumed_per_s", "out msg/s"), ("e2e_p99_ms", "e2e p99 ms")]
    else:
        keys += [("push_p99_ms", "push p99 ms")]

    def med(target, key):
        return statistics.median(r[key] for r in rows if r["target"] == target)

    print("round  target " + "".join(f"{label:>14}" for _, label in keys))
    for r in rows:
        print(f"{r['round']:>5}  {r['target']:<6} " + "".join(f"{r[k]:>14.1f}" for k, _ in keys))
    peer = "base" if any(r["target"] == "base" for r in rows) else "redis"
    for target in ("queen", peer):
        print(f"median {target:<6}" + "".join(f"{med(target, k):>14.1f}" for k, _ in keys))
    print(f"ratio q/{peer[0]}    " + "".join(f"{med('queen', k) / max(med(peer, k), 1e-9):>14.2f}"
                                          for k, _ in keys))


if __name__ == "__main__":
    main()
