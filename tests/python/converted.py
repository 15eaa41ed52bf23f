"""Mixed-precision fixtures as users make them: the float32 exports of the newest version set
(tests/models/manifest.json) converted to float16 by the converters users run, each in the forms
they are asked for. Made by the tools themselves when a suite first needs them (the conversion is
deterministic for the pinned versions of tests/requirements.txt), into a cache directory, so that
the repository holds the recipe, not a second copy of every model.

Forms (the converter's own names for its options):
* ort-fp16: ONNX Runtime's `convert_float_to_float16(keep_io_types=True)`, everything it may
  convert in float16;
* ort-softmax-fp32: the same with `op_block_list` + Softmax, the softmax kept in float32 (the seed
  form: Casts around every Softmax, the mask added before them in decoders);
* ort-core-fp32: the same with `node_block_list` naming each block's QKᵀ MatMul, its scale, the
  Softmax and the ·V MatMul, "attention in float32, the rest in float16": Casts on q, k and v
  where they enter and a float32 → float16 → float32 round trip between every two kept steps;
* occ-fp16: onnxconverter-common's `convert_float_to_float16(keep_io_types=True)`.

Each is judged against the float32 model it came from: the fused model may be no further from it
than the converted one is (conformance.compare). ONNX Runtime 1.23's CPU provider refuses many of
the converted models (valid ONNX: a Cast to the type it already has before an op it runs only in
float32 trips the casts it inserts itself); tests/models/converted.json lists which, with its
reason, the suite holds the list exact (`python tests/python/converted.py --refresh` rewrites it),
and the ONNX reference evaluator runs them instead, on random feeds without padding: on fully
masked rows the two runtimes disagree about the float16 original itself (a -65504 fill absorbs
the scores in numpy's float16 arithmetic, not in ONNX Runtime's), so those rows are judged only
where ONNX Runtime runs the model. The converters also write type-invalid models, which neither
runs (onnxconverter-common for most newer exports): listed with the evaluator's reason, and not
judged.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import sys
import tempfile
import warnings

import onnx

import conformance

RECIPE = conformance.MODELS / "converted.json"
SET = "transformers-5.24"
FORMS = ("ort-fp16", "ort-softmax-fp32", "ort-core-fp32", "occ-fp16")
# Where the converted files go: FUSEKIT_CONVERTED_DIR, else a directory of the system's temp.
CACHE = pathlib.Path(os.environ.get("FUSEKIT_CONVERTED_DIR") or
                     pathlib.Path(tempfile.gettempdir()) / "fusekit-converted")


# Families not converted: JetMoE routes each token to its top 2 of 4 experts, and where two
# experts' logits lie within float16 rounding of each other the converted model and the fused one
# route a token differently (that token's logits off by ~0.9 against the float32 original, the
# others' by ~0.01): the mean-error comparison then measures which of the two a flip hit, not the
# fusion. (ONNX Runtime's CPU provider could not run three of its four forms either: no float16
# ScatterND with reduction add.) HunyuanVideo 1.5's TorchScript export stops onnxconverter-common
# itself (remove_unnecessary_cast_node: "'list' object has no attribute 'input'"), and its float32
# form leaves the joint blocks unfused for a reason no precision changes (conformance.REMAINING).
NOT_CONVERTED = {"jetmoe", "hunyuan_video15"}


def sources() -> list[dict]:
    """The float32 fixtures of the newest set, the models users convert."""
    return [f for f in conformance.fixtures()
            if f["set"] == SET and f["dtype"] == "float32" and f["family"] not in NOT_CONVERTED]


def fixtures() -> list[dict]:
    """One entry per source and form, in the manifest's schema: `file` relative to the cache,
    `converted_from` the source's manifest entry, `form` one of FORMS. Inputs and outputs keep
    their types (keep_io_types), so the source's feeds serve."""
    out = []
    for source in sources():
        stem = pathlib.PurePosixPath(source["file"]).name.removesuffix(".fp32.onnx")
        for form in FORMS:
            out.append({**source, "file": f"{form}/{SET}/{stem}.{form}.onnx", "dtype": "float16",
                        "form": form, "converted_from": source})
    return out


def unloadable() -> dict[str, str]:
    """Converted files ONNX Runtime refuses to load, by `file`: its message."""
    return {f: r["onnxruntime"] for f, r in json.loads(RECIPE.read_text())["refused"].items()}


def invalid() -> dict[str, str]:
    """Of those, the ones the ONNX reference evaluator cannot run either (type errors the
    converter wrote), by `file`: its message. The others it runs in ONNX Runtime's stead."""
    return {f: r["reference"] for f, r in json.loads(RECIPE.read_text())["refused"].items()
            if r["reference"] is not None}


def judged_fixtures() -> list[dict]:
    """The manifest's fixtures, then the converted ones that are valid models; those ONNX Runtime
    refuses are run by the ONNX reference evaluator (marked so)."""
    refused, bad = unloadable(), invalid()
    return [*conformance.fixtures(),
            *({**f, "judge": "onnx.reference"} if f["file"] in refused else f
              for f in fixtures() if f["file"] not in bad)]


def source_of(fixture: dict) -> pathlib.Path:
    """A judged fixture's file: the manifest's, or the converted one (made if it is not yet)."""
    return path_of(fixture) if "converted_from" in fixture else conformance.MODELS / fixture["file"]


def load_error(path: pathlib.Path) -> str | None:
    """ONNX Runtime's one-line reason for refusing the file, the path left out; None if it
    loads."""
    try:
        conformance.session(path, optimize=False)
    except Exception as e:  # onnxruntime raises its own Fail, InvalidGraph …
        return re.sub(r"Load model from \S+ failed:", "", str(e)).strip().splitlines()[0]
    return None


def reference_error(fixture: dict, path: pathlib.Path) -> str | None:
    """The ONNX reference evaluator's one-line reason for failing to run the file on a random
    feed; None if it runs."""
    try:
        conformance.reference_runs(path)[1](None, conformance.random_feed(fixture, 0))
    except Exception as e:  # the evaluator raises what its ops raise
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0]}"
    return None


def attention_core(model: onnx.ModelProto) -> list[str]:
    """The names of each block's QKᵀ MatMul, its scale (a Mul or Div by a constant on the scores,
    or on q and kᵀ), its Softmax and its ·V MatMul: what a user names to keep attention in
    float32."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    constants = {i.name for i in graph.initializer} | {
        o for n in graph.node if n.op_type == "Constant" for o in n.output}

    def scale(n):
        return n is not None and n.op_type in ("Mul", "Div") and \
            any(i in constants for i in n.input)

    names = []
    for softmax in (n for n in graph.node if n.op_type == "Softmax"):
        names.append(softmax.name)
        # Up the data path to the product: through the scale, masks, selects and views.
        node = producer.get(softmax.input[0])
        for _ in range(8):
            if node is None or node.op_type == "MatMul":
                break
            if scale(node):
                names.append(node.name)
            data = [producer.get(i) for i in node.input if i and i not in constants]
            data = [p for p in data if p is not None and p.op_type not in ("Constant",)]
            node = data[-1] if node.op_type == "Where" and data else (data[0] if data else None)
        if node is not None and node.op_type == "MatMul":
            names.append(node.name)
            names += [p.name for p in (producer.get(i) for i in node.input) if scale(p)]
        # Down to the ·V product: through casts, the NaN guard and views.
        node = softmax
        for _ in range(6):
            nexts = [r for r in readers.get(node.output[0], []) if r.op_type != "IsNaN"]
            if not nexts:
                break
            node = nexts[0]
            if node.op_type == "MatMul":
                names.append(node.name)
                break
    return names


def convert(source: onnx.ModelProto, form: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.CopyFrom(source)
    for i, n in enumerate(model.graph.node):
        if not n.name:
            n.name = f"unnamed_{i}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if form == "occ-fp16":
            from onnxconverter_common import float16 as occ
            return occ.convert_float_to_float16(model, keep_io_types=True)
        from onnxruntime.transformers import float16 as ort16
        if form == "ort-fp16":
            return ort16.convert_float_to_float16(model, keep_io_types=True)
        if form == "ort-softmax-fp32":
            return ort16.convert_float_to_float16(
                model, keep_io_types=True, op_block_list=[*ort16.DEFAULT_OP_BLOCK_LIST, "Softmax"])
        if form == "ort-core-fp32":
            return ort16.convert_float_to_float16(model, keep_io_types=True,
                                                  node_block_list=attention_core(model))
    raise ValueError(f"unknown form {form}")


def path_of(fixture: dict) -> pathlib.Path:
    """The converted file, made on first use. A file from another source or converter version is
    made again: the cache key is the source's bytes, the form and the converters' versions."""
    import onnxconverter_common
    import onnxruntime
    source = conformance.MODELS / fixture["converted_from"]["file"]
    tools = f"{fixture['form']} {onnxruntime.__version__} {onnxconverter_common.__version__}"
    key = hashlib.sha256(source.read_bytes() + tools.encode()).hexdigest()[:16]
    path = CACHE / key / fixture["file"]
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        converted = convert(onnx.load(str(source)), fixture["form"])
        # Two test processes may convert the same file at once: each writes a file of its own.
        partial = path.with_suffix(f".{os.getpid()}.partial")
        onnx.save(converted, str(partial))
        partial.replace(path)
    return path


def refresh() -> int:
    """Converts every fixture and rewrites the recipe's list of those ONNX Runtime refuses, with
    whether the reference evaluator runs them."""
    refused = {}
    for fixture in fixtures():
        path = path_of(fixture)
        reason = load_error(path)
        if reason is not None:
            refused[fixture["file"]] = {"onnxruntime": reason,
                                        "reference": reference_error(fixture, path)}
    recipe = json.loads(RECIPE.read_text())
    recipe.pop("unloadable", None)
    recipe["refused"] = refused
    RECIPE.write_text(json.dumps(recipe, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(refused)} of {len(fixtures())} converted files are refused by ONNX Runtime, "
          f"{sum(r['reference'] is not None for r in refused.values())} of them invalid")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--refresh"]:
        sys.exit("usage: python tests/python/converted.py --refresh")
    sys.exit(refresh())
