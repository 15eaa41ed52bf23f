"""kernel_forms.py: ONNX Runtime CPU time of one computation in the forms a fusion may write.

Two choices the rules make for ONNX Runtime's CPU provider, each measured on one-node models in
interleaved rounds with one intra-op thread:

* norms: a residual Add folded into the norm after it or not: Add + LayerNormalization against
  SkipLayerNormalization, Add + SimplifiedLayerNormalization against
  SkipSimplifiedLayerNormalization, each with the sum as a second output (a pre-norm
  transformer's next residual reads it, so ONNX Runtime's own load-time fusion leaves the pair
  alone). Behind the skip rules' provider policy (rules/fusekit/rules/skip_normalization.hpp).
* attention: MultiHeadAttention reading k and v as [B, L, N*H] or as BNSH [B, N, L, H], q
  [B, S, N*H] either way. Behind reading the 3-D values the heads were split from
  (rules/fusekit/rules/fused_ops.hpp, three_d_of).

Run by a developer, never by CI, with any Python that has onnx, onnxruntime and numpy; to compare
ONNX Runtime releases, install each into a folder of its own and put it first on PYTHONPATH:

    python benchmarks/kernel_forms.py
    PYTHONPATH=/some/dir/ort-1.29 python benchmarks/kernel_forms.py --only norms

Prints markdown tables: each form's median time per run in microseconds (milliseconds for
attention) and the ratio of the medians.
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
    """Median µs per run of each norm form on inputs of `shape`."""
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal(shape).astype(np.float32) for n in ("x", "skip")}
    sessions = {}
    for form in FORMS:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        sessions[form] = ort.InferenceSession(model(form, shape), options,
                                              providers=["CPUExecutionProvider"])
        for _ in range(runs):
            sessions[form].run(None, inputs)
    seconds = interleaved(sessions, {form: inputs for form in FORMS}, rounds, runs)
    return {form: t * 1e6 for form, t in seconds.items()}


def mha_model(layout: str, batch: int, length: int, heads: int, head_size: int) -> bytes:
    f = TensorProto.FLOAT
    hidden = heads * head_size
    kv = [batch, length, hidden] if layout == "bsd" else [batch, heads, length, head_size]
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft",
                            num_heads=heads)
    graph = helper.make_graph(
        [node], "attention",
        [helper.make_tensor_value_info("q", f, [batch, length, hidden]),
         helper.make_tensor_value_info("k", f, kv), helper.make_tensor_value_info("v", f, kv)],
        [helper.make_tensor_value_info("y", f, [batch, length, hidden])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def interleaved(sessions: dict, feeds: dict, rounds: int, runs: int) -> dict[str, float]:
    """Median seconds per run of each session, the order rotated every round."""
    names = list(sessions)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(runs):
                sessions[n].run(None, feeds[n])
            times[n].append((time.perf_counter() - start) / runs)
    return {n: float(np.median(t)) for n, t in times.items()}


def attention(shape: list[int], rounds: int) -> dict[str, float]:
    batch, length, heads, head_size = shape
    rng = np.random.default_rng(0)
    hidden = heads * head_size
    q, k, v = (rng.standard_normal((batch, length, hidden)).astype(np.float32) for _ in range(3))
    split = [batch, length, heads, head_size]
    bnsh = {n: np.ascontiguousarray(x.reshape(split).transpose(0, 2, 1, 3))
            for n, x in (("k", k), ("v", v))}
    feeds = {"bsd": {"q": q, "k": k, "v": v}, "bnsh": {"q": q, **bnsh}}
    sessions = {}
    for layout in feeds:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        sessions[layout] = ort.InferenceSession(mha_model(layout, *shape), options,
                                                providers=["CPUExecutionProvider"])
    ys = [sessions[n].run(None, feeds[n])[0] for n in feeds]
    assert np.allclose(ys[0], ys[1], atol=1e-4), "the two layouts compute different outputs"
    runs = max(1, int(2e8 / (batch * length * length * hidden)))
    return interleaved(sessions, feeds, rounds, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("norms", "attention"))
    parser.add_argument("--norm-shapes", default="2x256x384,2x128x768,1x1x2048",
                        help="comma-separated BxSxD shapes (default: a DiT, a BERT-base "
                             "encoder, a decoder's decode step)")
    parser.add_argument("--attention-shapes", default="2x128x12x64,2x256x6x64,1x1500x6x64,"
                        "2x1024x8x40", help="comma-separated BxSxNxH shapes (default: BERT-base, "
                        "a DiT, Whisper's encoder, an SD UNet's top level)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=50, help="norms: runs per form in a round")
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, one intra-op thread\n")
    if args.only != "attention":
        print("| shape | Add + LayerNorm µs | SkipLayerNorm µs | ratio | Add + RMSNorm µs | "
              "SkipRMSNorm µs | ratio |")
        print("|---|---|---|---|---|---|---|")
        for text in args.norm_shapes.split(","):
            t = measure([int(d) for d in text.split("x")], args.rounds, args.runs)
            print(f"| {text} | {t['add+ln']:.0f} | {t['skip-ln']:.0f} | "
                  f"{t['skip-ln'] / t['add+ln']:.2f} | {t['add+rms']:.0f} | {t['skip-rms']:.0f} | "
                  f"{t['skip-rms'] / t['add+rms']:.2f} |")
        print()
    if args.only != "norms":
        print("| B×S×N×H | k, v [B, L, N·H] ms | k, v BNSH ms | BNSH ÷ 3-D |")
        print("|---|---|---|---|")
        for text in args.attention_shapes.split(","):
            t = attention([int(d) for d in text.split("x")], args.rounds)
            print(f"| {text} | {t['bsd'] * 1e3:.2f} | {t['bnsh'] * 1e3:.2f} | "
                  f"{t['bnsh'] / t['bsd']:.3f} |")


if __name__ == "__main__":
    main()
