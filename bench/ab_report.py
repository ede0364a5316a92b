#!/usr/bin/env python3
"""The medians of bench/ab.sh's rounds, old build against new, one scenario."""
import json
import statistics
import sys


def figures(d):
    out = {
        "ok/s": d.get("ok_throughput", 0.0),
        "p50 ms": d["ok_latency_us"]["p50"] / 1000,
        "p99 ms": d["ok_latency_us"]["p99"] / 1000,
        "server cores": d.get("server_cpu_cores", 0.0),
        "RSS after MB": d.get("rss_after_kb", 0) / 1024,
    }
    if "store_ops_per_pair" in d:
        out["store ops per pair"] = d["store_ops_per_pair"]
    if "watch" in d:
        w = d["watch"]
        out["updates/s"] = w["changes_per_s"]
        out["lag p50 ms"] = w["lag_us"]["p50"] / 1000
        out["lag p99 ms"] = w["lag_us"]["p99"] / 1000
        out["conflated"] = w["conflated"]
    return out


def main():
    out_dir, scenario, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    medians = {}
    for label in ("old", "new"):
        runs = [figures(json.load(open(f"{out_dir}/{scenario}-{label}-{r}.json")))
                for r in range(1, rounds + 1)]
        medians[label] = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
    print(f"\n{scenario} (median of {rounds} alternating rounds)")
    print(f"| figure | old | new | new / old |")
    print(f"|---|---|---|---|")
    for k, old in medians["old"].items():
        new = medians["new"][k]
        ratio = f"{new / old:.2f}" if old else "-"
        digits = 2 if k == "store ops per pair" else 1
        print(f"| {k} | {old:.{digits}f} | {new:.{digits}f} | {ratio} |")


if __name__ == "__main__":
    main()
