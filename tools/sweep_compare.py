#!/usr/bin/env python3
"""Compares two `kiln bench --sweep ... --json` results: per-value p50 ratio (candidate / base).

Usage: sweep_compare.py BASE.json[,BASE2.json...] CANDIDATE.json[,...] [--threshold 0.10]
       [--worst N]
       sweep_compare.py AB.json[,AB2.json...]   (a sweep run with --versus: base = the versus
                                                  side, candidate = the flags' own)

Several comma-separated files per side are repeated runs: each value's p50 is their minimum
(the run least disturbed by other processes on a loaded machine).

Prints the median, p90 and max of the ratio, the values slower than 1 + threshold (and their
ranges), and each side's compile counts and RSS. A file may hold other lines (stderr, the
output of `/usr/bin/time -v`): the last line that parses as a JSON object with "p50_ms" is used,
and the time's "Maximum resident set size" is reported when present.
"""
import argparse
import json
import re
import statistics
import sys


def load(path):
    """The sweep object and the peak RSS (MB) /usr/bin/time -v printed, if any."""
    sweep, time_rss = None, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "p50_ms" in obj and isinstance(obj["p50_ms"], list):
                    sweep = obj
            m = re.match(r"Maximum resident set size \(kbytes\): (\d+)", line)
            if m:
                time_rss = int(m.group(1)) / 1024.0
    if sweep is None:
        sys.exit(f"{path}: no sweep JSON line (kiln bench --sweep ... --json)")
    return sweep, time_rss


def versus_side(sweep):
    """The --versus side of an A/B sweep, under the plain field names."""
    out = {k[len("versus_"):]: v for k, v in sweep.items() if k.startswith("versus_")}
    if "p50_ms" not in out:
        sys.exit("one file given, but it has no --versus side (versus_p50_ms)")
    return out


def load_side(paths, versus=False):
    """Sweeps of one side, merged: per-value minimum p50; the first run's other fields."""
    runs = [load(p) for p in paths.split(",")]
    if versus:
        runs = [(versus_side(sweep), rss) for sweep, rss in runs]
    sweep, time_rss = runs[0]
    best = {}
    for run, _ in runs:
        for v, p in run["p50_ms"]:
            best[v] = min(p, best.get(v, p))
    merged = dict(sweep)
    merged["p50_ms"] = sorted(best.items())
    return merged, time_rss


def generic_share(sweep):
    """Per value: the share of timed kernel calls served by generic code, and compiles then."""
    out = {}
    for v, specialized, generic, compiles in sweep.get("timed_calls", []):
        total = specialized + generic
        out[v] = (generic / total if total else 0.0, compiles)
    return out


def ranges(values):
    """[1, 2, 3, 7] -> '1-3 7'."""
    out, start, prev = [], None, None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}-{prev}" if start != prev else f"{start}")
            start = prev = v
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else f"{start}")
    return " ".join(out)


def percentile(sorted_values, q):
    k = min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))
    return sorted_values[k]


def describe(name, sweep, time_rss):
    extra = f", max RSS (time -v) {time_rss:.1f} MB" if time_rss is not None else ""
    return (f"{name}: {sweep.get('llvm_compiles')} LLVM compiles "
            f"({sweep.get('first_tier_compiles')} first tier, {sweep.get('jit_compiles')} "
            f"dispatch), RSS at end {sweep.get('rss_mb')} MB, peak {sweep.get('peak_rss_mb')} "
            f"MB{extra}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("candidate", nargs="?")
    parser.add_argument("--threshold", type=float, default=0.10)
    parser.add_argument("--worst", type=int, default=10, help="list the N slowest values")
    args = parser.parse_args()
    if args.candidate is None:  # one A/B sweep: the process's RSS covers both sides
        base, _ = load_side(args.base, versus=True)
        cand, cand_rss = load_side(args.base)
        base_rss = None
    else:
        base, base_rss = load_side(args.base)
        cand, cand_rss = load_side(args.candidate)
    b = {v: p for v, p in base["p50_ms"]}
    c = {v: p for v, p in cand["p50_ms"]}
    common = sorted(set(b) & set(c))
    if not common:
        sys.exit("the two sweeps share no value")
    ratio = {v: c[v] / b[v] for v in common if b[v] > 0}
    r = sorted(ratio.values())
    slow = [v for v in common if ratio.get(v, 0) > 1 + args.threshold]
    print(describe("base", base, base_rss))
    print(describe("candidate", cand, cand_rss))
    print(f"p50 ratio candidate/base over {len(r)} values: median {statistics.median(r):.3f}, "
          f"p90 {percentile(r, 0.9):.3f}, max {r[-1]:.3f}, min {r[0]:.3f}")
    print(f"values > {1 + args.threshold:.2f}x: {len(slow)} ({ranges(slow)})")
    worst = sorted(ratio, key=ratio.get, reverse=True)[:args.worst]
    print("worst: " + ", ".join(f"{v}: {b[v]:.3f} -> {c[v]:.3f} ms ({ratio[v]:.2f})"
                                for v in worst))
    bg, cg = generic_share(base), generic_share(cand)
    if bg and cg:
        print("worst values' timed calls on generic code (base / candidate) and compiles while "
              "timed: " + ", ".join(
                  f"{v}: {bg[v][0]:.0%}/{cg[v][0]:.0%} c{bg[v][1]}/{cg[v][1]}" for v in worst
                  if v in bg and v in cg))
        busy = [v for v in common if cg.get(v, (0, 0))[1] > 0]
        print(f"candidate values with compiles while timed: {len(busy)} ({ranges(busy)})")


if __name__ == "__main__":
    main()
