"""skip_norm_latency.py: ONNX Runtime CPU time of a residual norm, fused and not.

Whether folding a residual Add into the norm after it pays on ONNX Runtime's CPU provider: the
one-node models Add + LayerNormalization, SkipLayerNormalization, Add +
SimplifiedLayerNormalization and SkipSimplifiedLayerNormalization, each with the sum as a second
output (a pre-norm transformer's next residual reads it, so ONNX Runtime's own load-time fusion
leaves the pair alone), timed in interleaved rounds with one intra-op thread. This is the
measurement behind the skip rules' provider policy (rules/fusekit/rules/skip_normalization.hpp).

Run by a developer, never by CI, with any Python that has onnx, onnxruntime and numpy; to compare
ONNX Runtime releases, install each into a folder of its own and put it first on PYTHONPATH:

    python benchmarks/skip_norm_latency.py
    PYTHONPATH=/some/dir/ort-1.29 python benchmarks/skip_norm_latency.py --shapes 2x256x384

Prints, per shape, each form's median time per run in microseconds and the fused ÷ unfused
ratio of the medians.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper


def model(form: str, shape: list[int]) -> bytes:
    hidden = shape[-1]
    f = TensorProto.FLOAT
    inits = [helper.make_tensor("gamma", f, [hidden], np.ones(hidden, np.float32))]
    if form in ("add+ln", "skip-ln"):
        inits.append(helper.make_tensor("beta", f, [hidden], np.zeros(hidden, np.float32)))
    weights = [i.name for i in inits]
    if form.startswith("add+"):
        norm = "LayerNormalization" if form == "add+ln" else "SimplifiedLayerNormalization"
        nodes = [helper.make_node("Add", ["x", "skip"], ["sum"]),
                 helper.make_node(norm, ["sum", *weights], ["y"], axis=-1, epsilon=1e-6)]
    else:
        fused = "SkipLayerNormalization" if form == "skip-ln" else \
            "SkipSimplifiedLayerNormalization"
        nodes = [helper.make_node(fused, ["x", "skip", *weights], ["y", "", "", "sum"],
                                  domain="com.microsoft", epsilon=1e-6)]
    graph = helper.make_graph(
        nodes, "residual_norm",
        [helper.make_tensor_value_info(n, f, shape) for n in ("x", "skip")],
        [helper.make_tensor_value_info(n, f, shape) for n in ("y", "sum")], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8  # what every ONNX Runtime release compared here reads
    return m.SerializeToString()


FORMS = ("add+ln", "skip-ln", "add+rms", "skip-rms")


def measure(shape: list[int], rounds: int, runs: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in ("x", "skip")}
    sessions = {}
    for form in FORMS:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        sessions[form] = ort.InferenceSession(model(form, shape), options,
                                              providers=["CPUExecutionProvider"])
        for _ in range(runs):
            sessions[form].run(None, feeds)
    times: dict[str, list[float]] = {form: [] for form in FORMS}
    for r in range(rounds):
        order = FORMS[r % len(FORMS):] + FORMS[:r % len(FORMS)]
        for form in order:
            start = time.perf_counter()
            for _ in range(runs):
                sessions[form].run(None, feeds)
            times[form].append((time.perf_counter() - start) / runs * 1e6)
    return {form: float(np.median(t)) for form, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2x256x384,2x128x768,1x1x2048",
                        help="comma-separated BxSxD shapes (default: a DiT, a BERT-base "
                             "encoder, a decoder's decode step)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=50, help="runs per form in a round")
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, one intra-op thread; median µs per run")
    print("| shape | Add + LayerNorm | SkipLayerNorm | ratio | Add + RMSNorm | SkipRMSNorm | ratio |")
    print("|---|---|---|---|---|---|---|")
    for text in args.shapes.split(","):
        shape = [int(d) for d in text.split("x")]
        t = measure(shape, args.rounds, args.runs)
        print(f"| {text} | {t['add+ln']:.0f} | {t['skip-ln']:.0f} | "
              f"{t['skip-ln'] / t['add+ln']:.2f} | {t['add+rms']:.0f} | {t['skip-rms']:.0f} | "
              f"{t['skip-rms'] / t['add+rms']:.2f} |")


if __name__ == "__main__":
    main()
