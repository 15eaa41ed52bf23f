"""clean_vs_peers.py FUSEKIT MODEL.onnx…: the clean-graph table of benchmarks/RESULTS.md.

Per model: its node count, and after `fusekit fuse` and after onnxslim (where it is installed) the
node count, the wall time of the tool (best of --repeat runs) and the largest difference from the
original's outputs in ONNX Runtime (CPU provider, one intra-op thread, the same random inputs;
a symbolic dim is 2). Then the totals and fusekit's time against onnxslim's.

Needs onnx, onnxruntime and numpy; onnxslim is optional (its columns are then empty).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


def nodes(path):
    return len(onnx.load(path, load_external_data=False).graph.node)


def feeds(path, seed=0):
    rng = np.random.default_rng(seed)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    out = {}
    for i in s.get_inputs():
        dims = [d if isinstance(d, int) and d > 0 else 2 for d in i.shape]
        kind = i.type[len("tensor("):-1]
        if kind in ("float", "float16", "double"):
            dtype = {"float": np.float32, "float16": np.float16, "double": np.float64}[kind]
            out[i.name] = rng.standard_normal(dims).astype(dtype)
        elif kind == "bool":
            out[i.name] = rng.integers(0, 2, dims).astype(bool)
        else:
            out[i.name] = rng.integers(0, 4, dims).astype(np.int64 if kind == "int64" else np.int32)
    return out


def run(path, inputs):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    return s.run(None, inputs)


def max_diff(a, b):
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
               for x, y in zip(a, b))


def timed(cmd, repeat):
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("fusekit")
    p.add_argument("models", nargs="+")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    slim = shutil.which("onnxslim")
    rows, totals = [], {"original": 0, "fusekit": 0, "onnxslim": 0, "t_fusekit": 0.0, "t_slim": 0.0}
    with tempfile.TemporaryDirectory() as scratch:
        for model in a.models:
            name = os.path.basename(model)[:-len(".onnx")]
            reference = run(model, inputs := feeds(model))
            row = {"model": name, "original": nodes(model)}
            out = os.path.join(scratch, name + ".fusekit.onnx")
            row["t_fusekit"] = timed([a.fusekit, "fuse", model, "-o", out, "--quiet"], a.repeat)
            row["fusekit"] = nodes(out)
            row["d_fusekit"] = max_diff(reference, run(out, inputs))
            if slim:
                out = os.path.join(scratch, name + ".slim.onnx")
                row["t_slim"] = timed([slim, model, out], a.repeat)
                row["onnxslim"] = nodes(out)
                row["d_slim"] = max_diff(reference, run(out, inputs))
            rows.append(row)
            for k in totals:
                totals[k] += row.get(k, 0)
            print(name, row, file=sys.stderr)
    print("| model | nodes | fusekit | onnxslim | fusekit s | onnxslim s | max diff fusekit | max diff onnxslim |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['original']} | {r['fusekit']} | {r.get('onnxslim', '')} | "
              f"{r['t_fusekit']:.2f} | {r.get('t_slim', float('nan')):.2f} | {r['d_fusekit']:.1e} | "
              f"{r.get('d_slim', float('nan')):.1e} |")
    print(f"| all {len(rows)} | {totals['original']} | {totals['fusekit']} | {totals['onnxslim']} | "
          f"{totals['t_fusekit']:.1f} | {totals['t_slim']:.1f} | | |")
    if totals["t_fusekit"] > 0 and totals["t_slim"] > 0:
        print(f"\nonnxslim's time ÷ fusekit's: {totals['t_slim'] / totals['t_fusekit']:.1f}")
    fewer = sum(1 for r in rows if "onnxslim" in r and r["fusekit"] <= r["onnxslim"])
    print(f"models where fusekit has at most onnxslim's nodes: {fewer} of {len(rows)}")


if __name__ == "__main__":
    main()
