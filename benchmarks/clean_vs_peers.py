"""clean_vs_peers.py FUSEKIT MODEL.onnx…: the clean-graph table of benchmarks/RESULTS.md.

Per model: its node count, and after `fusekit fuse`, onnxslim and onnxoptimizer (its fuse and
elimination passes) the node count, the wall time of the tool (best of --repeat runs; a peer's
includes its Python start, as a user pays it) and the largest difference from the original's
outputs in ONNX Runtime (CPU provider, one intra-op thread, the same random inputs; a symbolic
dim is 2). Then the totals, over the models every tool wrote, and the times against fusekit's.

A node is what a runtime runs: a call of a model-local function counts as the nodes of its body
(a runtime inlines it), so a tool that keeps a call is not credited with one node for a layer.
A tool that fails on a model (an error, or outputs that do not match) is named in its cell and
left out of the totals. --totals prints the totals alone (the fixtures: hundreds of rows).
--manifest tests/models/manifest.json draws a fixture's inputs as its manifest entry says (shapes
that agree with each other: a decode step's cache and mask), where a model's own symbolic dims
would be 2 each.

Needs onnx, onnxruntime and numpy; each peer is optional (its columns are then empty).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort



def tolerance(reference):
    # Relative to the outputs' size; float16 rounds in other places once ops are merged.
    half = any(x.dtype == np.float16 for x in reference)
    scale = max((float(np.max(np.abs(x))) for x in reference if x.size and x.dtype != bool),
                default=1.0)
    return (1e-2 if half else 1e-4) * max(1.0, scale)


def nodes(path):
    m = onnx.load(path, load_external_data=False)
    bodies = {(f.domain, f.name): f.node for f in m.functions}

    def count(ns):
        return sum(count(bodies[(n.domain, n.op_type)]) if (n.domain, n.op_type) in bodies else 1
                   for n in ns)

    return count(m.graph.node)


def manifest_feeds(entry, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for spec in entry["inputs"]:
        shape, fill = spec["shape"], spec["fill"]
        if "normal" in fill:
            value = fill["normal"] * rng.standard_normal(shape)
        elif "int" in fill:
            value = rng.integers(*fill["int"], size=shape)
        else:
            value = np.ones(shape)
        out[spec["name"]] = value.astype(np.dtype(spec["dtype"]))
    return out


def feeds(path, manifest, seed=0):
    for entry in manifest:
        if os.path.abspath(path).endswith(os.sep + os.path.normpath(entry["file"])):
            return manifest_feeds(entry, seed)
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
    def one(x, y):
        if not x.size:
            return 0.0
        if x.dtype == bool or y.dtype == bool:
            return float(np.any(x != y))
        return float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))))

    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    return max((one(x, y) for x, y in zip(a, b)), default=0.0)


def timed(cmd, repeat):
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best


OPTIMIZER = ("import sys, onnx, onnxoptimizer; m = onnx.load(sys.argv[1]); "
             "onnx.save(onnxoptimizer.optimize(m, onnxoptimizer.get_fuse_and_elimination_passes()),"
             " sys.argv[2])")


def tools(fusekit):
    out = {"fusekit": lambda src, dst: [fusekit, "fuse", src, "-o", dst, "--quiet"]}
    if slim := shutil.which("onnxslim"):
        out["onnxslim"] = lambda src, dst: [slim, src, dst]
    if subprocess.run([sys.executable, "-c", "import onnxoptimizer"],
                      capture_output=True).returncode == 0:
        out["onnxoptimizer"] = lambda src, dst: [sys.executable, "-c", OPTIMIZER, src, dst]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("fusekit")
    p.add_argument("models", nargs="+")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--totals", action="store_true", help="print the totals alone")
    p.add_argument("--manifest", help="tests/models/manifest.json: the fixtures' inputs")
    a = p.parse_args()
    manifest = json.load(open(a.manifest))["fixtures"] if a.manifest else []
    commands = tools(a.fusekit)
    names = list(commands)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for model in a.models:
            name = os.path.basename(model)[:-len(".onnx")]
            row = {"model": name, "original": nodes(model)}
            try:
                reference = run(model, inputs := feeds(model, manifest))
            except Exception as e:  # nothing to compare with: the model is left out, and named
                print(f"{name}: the original does not run: {str(e).splitlines()[0][:120]}")
                continue
            for tool, command in commands.items():
                out = os.path.join(scratch, f"{name}.{tool}.onnx")
                try:
                    row[f"t_{tool}"] = timed(command(model, out), a.repeat)
                    row[f"d_{tool}"] = max_diff(reference, run(out, inputs))
                    if not row[f"d_{tool}"] <= tolerance(reference):
                        raise RuntimeError(f"outputs differ by {row[f'd_{tool}']:.1e}")
                    row[tool] = nodes(out)
                except Exception as e:  # a tool's failure is a cell of the table
                    why = e.stderr.decode(errors="replace").strip().splitlines()[-1:] \
                        if isinstance(e, subprocess.CalledProcessError) and e.stderr else [str(e)]
                    row[f"x_{tool}"] = (why[0] if why else type(e).__name__)[:80]
            rows.append(row)
            print(name, row, file=sys.stderr)
    written = [r for r in rows if all(t in r for t in names)]
    if not a.totals:
        print("| model | nodes | " + " | ".join(names) + " | " +
              " | ".join(f"{t} s" for t in names) + " | " +
              " | ".join(f"max diff {t}" for t in names) + " |")
        print("|---" * (2 + 3 * len(names)) + "|")
        for r in rows:
            cells = [str(r[t]) if t in r else "fails" for t in names]
            cells += [f"{r[f't_{t}']:.2f}" if t in r else "" for t in names]
            cells += [f"{r[f'd_{t}']:.1e}" if t in r else "" for t in names]
            print(f"| {r['model']} | {r['original']} | " + " | ".join(cells) + " |")
        print(f"| all {len(written)} written by every tool | "
              f"{sum(r['original'] for r in written)} | " +
              " | ".join(str(sum(r[t] for r in written)) for t in names) + " | " +
              " | ".join(f"{sum(r[f't_{t}'] for r in written):.1f}" for t in names) + " | " +
              " | ".join("" for _ in names) + " |")
    print(f"\n{len(rows)} models; written by every tool: {len(written)}, "
          f"{sum(r['original'] for r in written)} nodes")
    for t in names:
        failed = [r["model"] for r in rows if t not in r]
        print(f"{t}: {sum(r[t] for r in written)} nodes, "
              f"{sum(r[f't_{t}'] for r in written):.1f} s; fails on {len(failed)}"
              + (f" ({', '.join(failed[:5])}{', …' if len(failed) > 5 else ''}: "
                 f"{rows[[r['model'] for r in rows].index(failed[0])]['x_' + t]})" if failed else ""))
    for t in names[1:]:
        both = [r for r in rows if "fusekit" in r and t in r]
        fewer = sum(1 for r in both if r["fusekit"] <= r[t])
        took = sum(r[f"t_{t}"] for r in both) / max(sum(r["t_fusekit"] for r in both), 1e-9)
        print(f"models where fusekit has at most {t}'s nodes: {fewer} of {len(both)}; "
              f"{t}'s time ÷ fusekit's: {took:.1f}")
        for r in both:
            if r["fusekit"] > r[t]:
                print(f"  above {t}: {r['model']} {r['fusekit']} against {r[t]}")


if __name__ == "__main__":
    main()
