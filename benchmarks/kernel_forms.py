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
* rotary: a rotary embedding of q and k [B, N, S, H], in the halves form (rotate_half, seven
  ops) and the interleaved one (pairs through a [..., H/2, 2] view, thirteen), each against what
  `fusekit fuse` makes of it (RotaryEmbedding, its cache and positions computed at run time: S is
  symbolic). Behind the rotary rules' default (rules/fusekit/rules/rotary_embedding.hpp); needs
  the fusekit CLI (--fusekit).

Run by a developer, never by CI, with any Python that has onnx, onnxruntime and numpy; to compare
ONNX Runtime releases, install each into a folder of its own and put it first on PYTHONPATH:

    python benchmarks/kernel_forms.py
    PYTHONPATH=/some/dir/ort-1.29 python benchmarks/kernel_forms.py --only norms
    python benchmarks/kernel_forms.py --only rotary --fusekit build/dev/examples/fusekit

Prints markdown tables: each form's median time per run in microseconds (milliseconds for
attention) and the ratio of the medians.
"""
from __future__ import annotations

import argparse
import pathlib
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort
import onnx
from onnx import TensorProto, helper, numpy_helper


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


def rotary_model(form: str, heads: int, head_size: int) -> onnx.ModelProto:
    """q and k [B, N, S, H] rotated by angles θ [1, S, H/2] an input gives, as the exporters
    write the two forms."""
    h = head_size // 2
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (
        ("zero", [0]), ("one", [1]), ("two", [2]), ("half", [h]), ("end", [head_size]),
        ("last", [-1]), ("tile", [1, 1, 1, 2]), ("as_pairs", [0, 0, 0, -1, 2]),
        ("merged", [0, 0, 0, -1]), ("flat", [0, 0, -1]))]
    if form == "halves":
        nodes = [helper.make_node("Concat", ["theta", "theta"], ["angles"], axis=-1)]
    else:
        nodes = [helper.make_node("Unsqueeze", ["theta", "last"], ["theta_1"]),
                 helper.make_node("Tile", ["theta_1", "tile"], ["theta_2"]),
                 helper.make_node("Reshape", ["theta_2", "flat"], ["angles"])]
    nodes += [helper.make_node("Cos", ["angles"], ["cos3"]),
              helper.make_node("Sin", ["angles"], ["sin3"]),
              helper.make_node("Unsqueeze", ["cos3", "one"], ["cos"]),
              helper.make_node("Unsqueeze", ["sin3", "one"], ["sin"])]
    for x in ("q", "k"):
        if form == "halves":
            nodes += [helper.make_node("Slice", [x, "zero", "half", "last"], [x + "_lower"]),
                      helper.make_node("Slice", [x, "half", "end", "last"], [x + "_upper"]),
                      helper.make_node("Neg", [x + "_upper"], [x + "_negated"]),
                      helper.make_node("Concat", [x + "_negated", x + "_lower"],
                                       [x + "_rotated"], axis=-1)]
        else:
            nodes += [helper.make_node("Reshape", [x, "as_pairs"], [x + "_pairs"]),
                      helper.make_node("Slice", [x + "_pairs", "zero", "one", "last"],
                                       [x + "_real1"]),
                      helper.make_node("Slice", [x + "_pairs", "one", "two", "last"],
                                       [x + "_imag1"]),
                      helper.make_node("Squeeze", [x + "_real1", "last"], [x + "_real"]),
                      helper.make_node("Squeeze", [x + "_imag1", "last"], [x + "_imag"]),
                      helper.make_node("Neg", [x + "_imag"], [x + "_negated"]),
                      helper.make_node("Unsqueeze", [x + "_negated", "last"], [x + "_first"]),
                      helper.make_node("Unsqueeze", [x + "_real", "last"], [x + "_second"]),
                      helper.make_node("Concat", [x + "_first", x + "_second"], [x + "_stack"],
                                       axis=-1),
                      helper.make_node("Reshape", [x + "_stack", "merged"], [x + "_rotated"])]
        nodes += [helper.make_node("Mul", [x, "cos"], [x + "_cos"]),
                  helper.make_node("Mul", [x + "_rotated", "sin"], [x + "_sin"]),
                  helper.make_node("Add", [x + "_cos", x + "_sin"], [x + "_embedded"])]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "rotary",
        [helper.make_tensor_value_info(x, f, ["B", heads, "S", head_size]) for x in ("q", "k")] +
        [helper.make_tensor_value_info("theta", f, [1, "S", h])],
        [helper.make_tensor_value_info(x + "_embedded", f, None) for x in ("q", "k")], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def rotary(form: str, shape: list[int], rounds: int, fusekit: str) -> dict[str, float]:
    """Median µs per run of the decomposition and of fusekit's fused model."""
    batch, heads, length, head_size = shape
    with tempfile.TemporaryDirectory() as work:
        original, fused = pathlib.Path(work, "original.onnx"), pathlib.Path(work, "fused.onnx")
        onnx.save(rotary_model(form, heads, head_size), str(original))
        rule = "rotary-embedding" if form == "halves" else "rotary-embedding-interleaved"
        subprocess.run([fusekit, "fuse", str(original), "-o", str(fused), "--rules", rule,
                        "--quiet"], check=True)
        assert "RotaryEmbedding" in {n.op_type for n in onnx.load(str(fused)).graph.node}
        sessions = {}
        for name, path in (("decomposed", original), ("fused", fused)):
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            sessions[name] = ort.InferenceSession(str(path), options,
                                                  providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {x: rng.standard_normal(shape).astype(np.float32) for x in ("q", "k")}
    feed["theta"] = rng.uniform(-3, 3, (1, length, head_size // 2)).astype(np.float32)
    ys = [sessions[n].run(None, feed) for n in sessions]
    assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(*ys)), "the forms differ"
    runs = max(1, int(2e6 / (batch * heads * length * head_size)))
    seconds = interleaved(sessions, {n: feed for n in sessions}, rounds, runs)
    return {n: t * 1e6 for n, t in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("norms", "attention", "rotary"))
    parser.add_argument("--norm-shapes", default="2x256x384,2x128x768,1x1x2048",
                        help="comma-separated BxSxD shapes (default: a DiT, a BERT-base "
                             "encoder, a decoder's decode step)")
    parser.add_argument("--attention-shapes", default="2x128x12x64,2x256x6x64,1x1500x6x64,"
                        "2x1024x8x40", help="comma-separated BxSxNxH shapes (default: BERT-base, "
                        "a DiT, Whisper's encoder, an SD UNet's top level)")
    parser.add_argument("--rotary-shapes", default="1x8x1x64,1x32x1x128,2x8x128x64,2x32x128x64,"
                        "2x16x1024x64,1x24x4096x128", help="comma-separated BxNxSxH shapes "
                        "(default: decode steps of a small and a 7B-size decoder, their prefills, "
                        "an F5-TTS-size DiT, a Flux-size MMDiT)")
    parser.add_argument("--fusekit", default="build/dev/examples/fusekit",
                        help="the fusekit CLI (rotary)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=50, help="norms: runs per form in a round")
    args = parser.parse_args()
    ort.set_default_logger_severity(3)
    print(f"onnxruntime {ort.__version__}, one intra-op thread\n")
    if args.only in (None, "norms"):
        print("| shape | Add + LayerNorm µs | SkipLayerNorm µs | ratio | Add + RMSNorm µs | "
              "SkipRMSNorm µs | ratio |")
        print("|---|---|---|---|---|---|---|")
        for text in args.norm_shapes.split(","):
            t = measure([int(d) for d in text.split("x")], args.rounds, args.runs)
            print(f"| {text} | {t['add+ln']:.0f} | {t['skip-ln']:.0f} | "
                  f"{t['skip-ln'] / t['add+ln']:.2f} | {t['add+rms']:.0f} | {t['skip-rms']:.0f} | "
                  f"{t['skip-rms'] / t['add+rms']:.2f} |")
        print()
    if args.only in (None, "rotary"):
        print("| B×N×S×H | halves µs | RotaryEmbedding µs | ratio | interleaved µs | "
              "RotaryEmbedding interleaved µs | ratio |")
        print("|---|---|---|---|---|---|---|")
        for text in args.rotary_shapes.split(","):
            shape = [int(d) for d in text.split("x")]
            a = rotary("halves", shape, args.rounds, args.fusekit)
            b = rotary("interleaved", shape, args.rounds, args.fusekit)
            print(f"| {text} | {a['decomposed']:.0f} | {a['fused']:.0f} | "
                  f"{a['fused'] / a['decomposed']:.2f} | {b['decomposed']:.0f} | "
                  f"{b['fused']:.0f} | {b['fused'] / b['decomposed']:.2f} |")
        print()
    if args.only in (None, "attention"):
        print("| B×S×N×H | k, v [B, L, N·H] ms | k, v BNSH ms | BNSH ÷ 3-D |")
        print("|---|---|---|---|")
        for text in args.attention_shapes.split(","):
            t = attention([int(d) for d in text.split("x")], args.rounds)
            print(f"| {text} | {t['bsd'] * 1e3:.2f} | {t['bnsh'] * 1e3:.2f} | "
                  f"{t['bnsh'] / t['bsd']:.3f} |")


if __name__ == "__main__":
    main()
