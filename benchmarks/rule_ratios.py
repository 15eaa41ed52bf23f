"""rule_ratios.py RUN.json: the rule-count table of benchmarks/RESULTS.md, from a fusekit_benchmarks
run with --benchmark_filter='^rules_' --benchmark_repetitions=N --benchmark_out=RUN.json
--benchmark_out_format=json.

Per model and rule set: the range of CPU times over the repetitions, that range against the floor
(parse and serialise of the same bytes, its median), and against the bundled rules' median.
"""
import json
import statistics
import sys


def main(path):
    times = {}
    counters = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        parts = b["name"].split("/")
        key = (parts[1], parts[2] if len(parts) > 2 else "floor")
        times.setdefault(key, []).append(b["cpu_time"])
        counters[key] = b
    models = sorted({m for m, _ in times}, key=lambda m: m != "dit")
    sets = ["floor", "one", "bundled", "bundled+100", "bundled+1000", "bundled+100_at_MatMul"]
    print("| model | rules | fusions | CPU ms | ÷ floor | ÷ bundled |")
    print("|---|---|---|---|---|---|")
    for m in models:
        floor = statistics.median(times[(m, "floor")])
        bundled = statistics.median(times[(m, "bundled")])
        for s in sets:
            if (m, s) not in times:
                continue
            lo, hi = min(times[(m, s)]), max(times[(m, s)])
            c = counters[(m, s)]
            rules = f"{int(c['rules']):,}" if "rules" in c else "—"
            fusions = f"{int(c['fusions']):,}" if "fusions" in c else "—"
            print(f"| {m} | {s} ({rules}) | {fusions} | {lo:.0f}–{hi:.0f} | "
                  f"{lo / floor:.2f}–{hi / floor:.2f} | {lo / bundled:.2f}–{hi / bundled:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
