"""ratios.py RUN.json: the figures benchmarks/RESULTS.md records, from one fusekit_benchmarks run
written with --benchmark_out=RUN.json --benchmark_out_format=json.

Per size: each phase's time per node (fuse_run: the whole fuse step), fuse_run against protobuf
parse of the same file, the share of the run that the pass proving the fixed point takes
(fuse_fixpoint ÷ fuse_run), and the 10,000-layer / 100-layer ratio of time per node for every phase.
"""
import json
import sys

PHASES = ["parse", "index", "match", "commit", "serialise", "run", "fixpoint", "end_to_end"]


def main(path):
    runs = {}
    for b in json.load(open(path))["benchmarks"]:
        name, _, layers = b["name"].partition("/")
        name = name.removeprefix("fuse_")
        if name in PHASES and b.get("run_type", "iteration") == "iteration":
            runs[(name, int(layers))] = b
    sizes = sorted({layers for _, layers in runs})
    print("| layers | nodes | " + " | ".join(f"{p} µs/node" for p in PHASES) + " | run ÷ parse | fixpoint ÷ run |")
    print("|---" * (len(PHASES) + 4) + "|")
    for layers in sizes:
        row = [f"{layers:,}", f"{int(runs[('parse', layers)]['nodes']):,}"]
        for p in PHASES:
            row.append(f"{runs[(p, layers)]['per_node'] * 1e6:.3f}" if (p, layers) in runs else "—")
        fuse, parse = runs.get(("run", layers)), runs.get(("parse", layers))
        row.append(f"{fuse['cpu_time'] / parse['cpu_time']:.2f}" if fuse and parse else "—")
        fixpoint = runs.get(("fixpoint", layers))
        row.append(f"{fixpoint['cpu_time'] / fuse['cpu_time']:.2f}" if fuse and fixpoint else "—")
        print("| " + " | ".join(row) + " |")
    print()
    for p in PHASES:
        if (p, 10000) in runs and (p, 100) in runs:
            ratio = runs[(p, 10000)]["per_node"] / runs[(p, 100)]["per_node"]
            print(f"{p}: time per node, 10,000 layers ÷ 100 layers = {ratio:.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
