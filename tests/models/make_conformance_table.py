"""Writes tests/models/CONFORMANCE.md: fixture × target → attention blocks, blocks fused by the
fusekit CLI, the near-miss reasons for the rest; beside it what the peers made of the same files
(tests/models/peers.json, written by peers.py); the same for the mixed-precision fixtures converted
from the newest set's float32 exports (tests/python/converted.py), with each fused model's accuracy
against the float32 original; and, per fixture, the shape facts the CLI infers against ONNX
Runtime's symbolic shape inference (tests/python/facts_vs_ssi.py).

    python tests/models/make_conformance_table.py FUSEKIT_CLI

Needs onnx, onnxruntime and numpy (the project's .venv).
"""
from __future__ import annotations

import fnmatch
import json
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "python"))

import conformance  # noqa: E402
import converted  # noqa: E402
import facts_vs_ssi  # noqa: E402

PEERS = HERE / "peers.json"
PEER_NAMES = {"ort_optimizer": "ORT optimizer", "onnxscript": "onnxscript", "onnxsim": "onnxsim"}
# One line each, after converted.py's docstring.
FORMS = {
    "ort-fp16": "ONNX Runtime's `convert_float_to_float16(keep_io_types=True)`: everything it may "
                "convert in float16.",
    "ort-softmax-fp32": "the same with `Softmax` added to `op_block_list`: the softmax kept in "
                        "float32, Casts around every Softmax.",
    "ort-core-fp32": "the same with `node_block_list` naming each block's QKᵀ MatMul, its scale, "
                     "the Softmax and the ·V MatMul: attention in float32, the rest in float16.",
    "occ-fp16": "onnxconverter-common's `convert_float_to_float16(keep_io_types=True)`.",
}


def cell(fused: int, blocks: int, ok: bool = True) -> str:
    mark = "✅" if fused == blocks and ok else ("⚠️" if not ok else "❌" if fused == 0 else "◐")
    return f"{mark} {fused}/{blocks}"


def peer_cell(result: dict | None, blocks: int) -> str:
    if result is None:
        return "—"
    if result.get("error"):
        return f"💥 {result['error_kind']}"
    text = cell(result["fused"], blocks, result.get("matches") is not False)
    if result.get("matches") is False:
        text += " (wrong outputs)"
    return text


def counts(result: dict | None) -> bool:
    """Whether a peer's result counts: ONNX Runtime loads it and its outputs match."""
    return bool(result) and not result.get("error") and result.get("matches") is not False


def precision_peer_cell(result: dict | None, blocks: int) -> str:
    """peer_cell, saying where a converted fixture's outputs match but are less accurate."""
    if result and result.get("matches") is False and "mean error" in result.get("mismatch", "") \
            and result.get("accuracy"):
        return f"{cell(result['fused'], blocks, False)} (less accurate: " \
               f"{result['accuracy'][0]:.2f}× the mean error)"
    return peer_cell(result, blocks)


def general(reason: str) -> str:
    """A runtime's message without the names and shapes that differ from file to file."""
    reason = reason.replace("[ONNXRuntimeError] : 1 : FAIL : ", "").replace("''", "'").strip()
    reason = re.sub(r"Load model from \S+ failed: ?", "", reason)
    reason = re.sub(r"tensor\((\w+)\)", r"tensor<\1>", reason)
    reason = re.sub(r"\(([^()]*)\)", lambda m: m.group(0) if re.fullmatch(
        r"tensor<\w+>|T", m.group(1)) else "(…)", reason)
    reason = re.sub(r"'[^' ]*[_/0-9.][^' ]*'", "'…'", reason)
    reason = re.sub(r"\bname: \S+", "name: …", reason)
    return re.sub(r"tensor<(\w+)>", r"tensor(\1)", reason)


def reason_table(title: str, by_form: dict[str, dict[str, int]]) -> list[str]:
    """reason × form → count, the commonest reason first."""
    totals = {}
    for form in by_form.values():
        for reason, n in form.items():
            totals[reason] = totals.get(reason, 0) + n
    return [f"| {title} | " + " | ".join(f"`{f}`" for f in FORMS) + " |",
            "|---|" + "---|" * len(FORMS),
            *(f"| {reason} | " + " | ".join(str(by_form[f].get(reason, 0)) for f in FORMS) + " |"
              for reason, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))]


# Blocks left unfused, per (fixture stem, target), converted fixtures too: what "What remains,
# and why" accounts for.
UNFUSED: dict[tuple[str, str], int] = {}


def remaining_section() -> list[str]:
    """Each of conformance.REMAINING with why it is right that its blocks remain, and the
    fixtures it covers; then any unfused blocks no entry covers (the suite fails on those)."""
    out = ["## What remains, and why", "",
           "The blocks fusekit leaves unfused on purpose (`conformance.REMAINING`, which the suite "
           "holds to: each is a strict expected failure whose report must give the reason quoted "
           "here).", ""]
    covered = set()
    for r in conformance.REMAINING:
        where = sorted((stem, target) for stem, target in UNFUSED
                       if fnmatch.fnmatchcase(stem, r.fixtures) and
                       fnmatch.fnmatchcase(target, r.target))
        covered.update(where)
        blocks = sum(UNFUSED[w] for w in where)
        out.append(f"- **{blocks} block{'s' if blocks != 1 else ''}**, reported as "
                   f"\"{r.reason}…\": {r.why}  \n  in: " +
                   ", ".join(f"`{stem} ({target})`" for stem, target in where))
    rest = sorted(set(UNFUSED) - covered)
    if rest:
        out += ["", "Not accounted for (the suite fails on these): " +
                ", ".join(f"`{stem} ({target})`" for stem, target in rest)]
    return out


def precision(cli: str, peers: dict, work: pathlib.Path, bf16: list[str]) -> list[str]:
    """The "Precision" section: per form, each converted fixture ONNX Runtime loads, fused with
    `--target ort`, judged by conformance.compare (parity and accuracy), its accuracy ratios, the
    peers' cells; then the converted files ONNX Runtime refuses."""
    refused = converted.unloadable()
    invalid = converted.invalid() if hasattr(converted, "invalid") else {}
    forms: dict[str, dict] = {f: {"rows": [], "fixtures": 0, "blocks": 0, "fusekit": 0,
                                  "peers": {p: 0 for p in PEER_NAMES}, "refused": 0,
                                  "reasons": {}} for f in FORMS}
    refusals = {f: {} for f in FORMS}
    reference = {f: {} for f in FORMS}
    peer_errors = {f: {} for f in FORMS}
    for fixture in converted.fixtures():
        form, stem = forms[fixture["form"]], fixture["file"].removesuffix(".onnx")
        if fixture["file"] in refused:
            form["refused"] += 1
            why = general(refused[fixture["file"]])
            refusals[fixture["form"]][why] = refusals[fixture["form"]].get(why, 0) + 1
            why = general(invalid[fixture["file"]]) if fixture["file"] in invalid else \
                "runs it (the suite judges the fused model there)"
            reference[fixture["form"]][why] = reference[fixture["form"]].get(why, 0) + 1
            continue
        source = converted.path_of(fixture)
        result = conformance.fuse(cli, source, "ort", work / "converted")
        try:
            conformance.compare(fixture, result.output, source=source)
            ok, wrong = True, ""
        except AssertionError as e:
            ok, wrong = False, f" ({str(e).splitlines()[0]})"
        except Exception as e:  # ONNX Runtime refuses the fused model
            ok, wrong = False, f" (ONNX Runtime refuses it: {str(e).splitlines()[0][:200]})"
        try:
            mean, largest = conformance.accuracy(fixture, source, result.output)
            ratios = f"{mean:.3f} | {largest:.3f}"
        except Exception:
            ratios = "— | —"
        form["fixtures"] += 1
        form["blocks"] += fixture["blocks"]
        form["fusekit"] += result.fused if ok else 0
        if result.fused < result.blocks:
            UNFUSED[(stem, "ort")] = result.blocks - result.fused
            for r in result.reasons:
                form["reasons"].setdefault(r, []).append(stem)
        peer_results = peers["results"].get(stem, {})
        for p in PEER_NAMES:
            r = peer_results.get(p)
            form["peers"][p] += r["fused"] if counts(r) else 0
            if r and r.get("error"):
                why = f"{PEER_NAMES[p]}: {general(r['error'])}"
                peer_errors[fixture["form"]][why] = peer_errors[fixture["form"]].get(why, 0) + 1
        form["rows"].append(f"| `{stem}` | {fixture['blocks']} | "
                            f"{cell(result.fused, result.blocks, ok)}{wrong} | {ratios} | " +
                            " | ".join(precision_peer_cell(peer_results.get(p), fixture["blocks"])
                                       for p in PEER_NAMES) + " |")
    made = peers.get("converted_with")
    made = ", ".join(f"{k} {v}" for k, v in made.items()) if made else "not recorded"
    out = [
        "## Precision",
        "",
        f"The float32 exports of `{converted.SET}` converted to float16 by the converters users "
        "run (`tests/python/converted.py`, made when the suite first needs them), in four forms:",
        "",
        *(f"- `{name}`: {what}" for name, what in FORMS.items()),
        "",
        "Inputs and outputs keep their float32 types. fusekit `--target ort` (the sources are "
        "opset < 23, so `--target onnx` does not apply); ✅ when every block fused and "
        "`conformance.compare` passed: outputs match the converted model's on random and padded "
        "feeds, both measured against the float32 original, and the fused model's mean absolute "
        "error against the float32 original is within 5 % of the converted model's. "
        "accuracy mean and max: the fused model's mean and largest error against the float32 "
        "original over 16 random feeds, each divided by the converted model's (below 1: more "
        "accurate; the max is reported, not bound: one element's rounding decides it). The peers "
        "are judged the same way on the same converted files (made with "
        f"{made}); a peer's cell counts only if ONNX Runtime loads its result and it passes. "
        "The files ONNX Runtime refuses are listed after the tables, not judged here.",
        "",
        "| form | fixtures ONNX Runtime loads | blocks | fusekit ort | " +
        " | ".join(PEER_NAMES.values()) + " |",
        "|---|---|---|---|" + "---|" * len(PEER_NAMES),
        *(f"| `{name}` | {form['fixtures']} of {form['fixtures'] + form['refused']} | "
          f"{form['blocks']} | {form['fusekit']}/{form['blocks']} | " +
          " | ".join(f"{form['peers'][p]}/{form['blocks']}" for p in PEER_NAMES) + " |"
          for name, form in forms.items()),
        "",
    ]
    for name, form in forms.items():
        out += [
            f"### {name}",
            "",
            f"Totals: fusekit `--target ort` {form['fusekit']}/{form['blocks']}; " +
            ", ".join(f"{PEER_NAMES[p]} {n}/{form['blocks']}" for p, n in form["peers"].items())
            + f" (fused, outputs matching and as accurate; {form['fixtures']} fixtures, "
            f"{form['refused']} more refused by ONNX Runtime).",
            "",
        ]
        out += [
            "| fixture | blocks | fusekit ort | accuracy mean | accuracy max | " +
            " | ".join(PEER_NAMES.values()) + " |",
            "|---|---|---|---|---|" + "---|" * len(PEER_NAMES),
            *form["rows"],
            "",
        ] if form["rows"] else ["ONNX Runtime refuses every file of this form.", ""]
        if form["reasons"]:
            out += ["Why fusekit left blocks unfused:", ""]
            out += [f"- {reason}  \n  in: " + ", ".join(f"`{w}`" for w in where)
                    for reason, where in sorted(form["reasons"].items(),
                                                key=lambda kv: (-len(kv[1]), kv[0]))]
            out.append("")
    if any(peer_errors.values()):
        out += ["### Peer failures on the converted fixtures", "",
                "Names and shapes left out, by form.", "",
                *reason_table("peer: failure", peer_errors), ""]
    out += [
        "### Converted files ONNX Runtime refuses",
        "",
        f"{sum(f['refused'] for f in forms.values())} of {len(converted.fixtures())} converted "
        "files (`tests/models/converted.json`, which the suite holds exact): ONNX Runtime's "
        "reason, names and shapes left out, by form. The ONNX reference evaluator runs some of "
        "them in its stead; the others the converter wrote with type errors it meets too.",
        "",
        *reason_table("ONNX Runtime refuses it", refusals),
        "",
        *reason_table("the ONNX reference evaluator", reference),
        "",
        "### bfloat16",
        "",
        "The converters above write float16 only. The bfloat16 fixtures are the exporter's own "
        "(dtype `bfloat16` in the manifest) and stand in the per-set tables above: " +
        ", ".join(bf16) + ". ONNX Runtime's CPU provider has no bfloat16 kernels for most ops, "
        "so the ONNX reference evaluator runs them (against a float32 twin), the peers' results "
        "too. `--target ort` leaves them unfused: com.microsoft MultiHeadAttention takes float32 "
        f"or float16, not bfloat16, in ONNX Runtime {conformance.ort.__version__}'s schema (the "
        "suite's); newer schemas also take bfloat16, which is why a peer may fuse them. Before "
        "opset 23 there is no ai.onnx Attention to fuse into.",
    ]
    return out


LAYER_TOOLS = {"fusekit": "fusekit ort", "fusekit_cuda": "fusekit ort --provider cuda",
               "ort_optimizer": "ORT optimizer", "onnxscript": "onnxscript"}


def layer_cell(ops: dict[str, int] | None) -> str:
    if ops is None:
        return "—"
    return ", ".join(f"{op} {n}" for op, n in sorted(ops.items())) or "none"


def layer_row(stem: str, result, cuda, peer_results: dict,
              totals: dict[str, dict[str, int]]) -> str:
    """One float32 fixture's norm and activation ops, as fusekit (`--target ort`, for each
    provider) and each peer wrote them; a peer's counts only where ONNX Runtime loads its model
    and its outputs match."""
    found = {"fusekit": conformance.layer_ops(conformance.onnx.load(str(result.output))),
             "fusekit_cuda": conformance.layer_ops(conformance.onnx.load(str(cuda.output)))}
    for p in ("ort_optimizer", "onnxscript"):
        r = peer_results.get(p)
        found[p] = r.get("layer_ops") if counts(r) else None
    for tool, ops in found.items():
        for op, n in (ops or {}).items():
            totals.setdefault(op, {}).setdefault(tool, 0)
            totals[op][tool] += n
    return f"| `{stem}` | " + " | ".join(layer_cell(found[t]) for t in LAYER_TOOLS) + " |"


def layer_section(rows: list[str], totals: dict[str, dict[str, int]]) -> list[str]:
    return [
        "## Norms, activations and rotary embeddings",
        "",
        "The float32 fixtures of every set: the norm, GELU and rotary embedding ops in the model "
        "each tool writes "
        "(`--target ort` for fusekit, for the CPU provider, the default, and for CUDA; the peers "
        "as above, counted where their model loads and matches). The exporters write "
        "LayerNormalization themselves from opset 17, so a `LayerNorm` count is what no tool "
        "folded into a residual; fusekit folds a residual sum that the next layer reads too for "
        "CUDA alone, since on ONNX Runtime's CPU provider (1.30 on) the skip norms are slower "
        "than the Add and norm they replace (rules/fusekit/rules/skip_normalization.hpp). RMSNorm, "
        "GELU and rotary embeddings are written out in elementary ops, which the ops here "
        "replace. ONNX Runtime parity of every "
        "fusekit model is checked by the conformance suite, as for attention.",
        "",
        "| op | " + " | ".join(LAYER_TOOLS.values()) + " |",
        "|---|" + "---|" * len(LAYER_TOOLS),
        *(f"| {op} | " + " | ".join(str(by_tool.get(t, 0)) for t in LAYER_TOOLS) + " |"
          for op, by_tool in sorted(totals.items())),
        "",
        "| fixture | " + " | ".join(LAYER_TOOLS.values()) + " |",
        "|---|" + "---|" * len(LAYER_TOOLS),
        *rows,
        "",
    ]


def half_precision_layers(cli: str, work: pathlib.Path) -> list[str]:
    """fusekit's norm, GELU and rotary ops in the half-precision fixtures with `--provider cuda`
    (the manifest's float16 and bfloat16 exports, and each converted form the suite runs), and the
    converted ones' accuracy as CUDA computes them (conformance.compare's per_op judging)."""
    cases = [(f"`{f['form']}`" if "form" in f else f"{f['dtype']} exports", f)
             for f in converted.judged_fixtures() if f["dtype"] != "float32"]
    groups: dict[str, dict] = {}
    for label, fixture in cases:
        source = converted.source_of(fixture)
        cuda = conformance.fuse(cli, source, "ort", work / "half", provider="cuda")
        group = groups.setdefault(label, {"files": 0, "ops": {}, "ratios": []})
        group["files"] += 1
        for op, n in conformance.layer_ops(conformance.onnx.load(str(cuda.output))).items():
            group["ops"][op] = group["ops"].get(op, 0) + n
        if "converted_from" in fixture:
            group["ratios"].append(conformance.accuracy(fixture, source, cuda.output,
                                                        per_op=True)[0])
    ops = sorted({op for g in groups.values() for op in g["ops"]})
    ratio = lambda r: f"{min(r):.2f}–{max(r):.2f}" if r else "—"
    return [
        "### Half precision, `--provider cuda`",
        "",
        "The same ops in the float16 and bfloat16 fixtures, fused with `--target ort --provider "
        "cuda`. ONNX Runtime's CUDA provider runs a half-precision model's elementary ops in its "
        "type, each rounding its output, while the fused ops compute in float32 and round once; "
        "for the CPU provider (the default) fusekit fuses none of them in half precision, since "
        "that provider runs the elementary ops in float32 and the unfused form is the more "
        "accurate there (rules/fusekit/rules/layer_ops.hpp). The suite judges these models as "
        "CUDA runs them: both the original and the fused one run by the ONNX reference "
        "evaluator, every op rounding to its type, against the float32 original "
        "(`test_cuda_provider`); accuracy mean is the fused model's mean error over 16 random "
        "feeds divided by the converted one's, judged so (the least and the largest of the "
        "form's files).",
        "",
        "| op | " + " | ".join(f"{label} ({g['files']} files)" for label, g in groups.items())
        + " |",
        "|---|" + "---|" * len(groups),
        *(f"| {op} | " + " | ".join(str(g["ops"].get(op, 0)) for g in groups.values()) + " |"
          for op in ops),
        "| accuracy mean | " + " | ".join(ratio(g["ratios"]) for g in groups.values()) + " |",
        "",
    ]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    cli = sys.argv[1]
    manifest = json.loads(conformance.MANIFEST.read_text())
    peers = json.loads(PEERS.read_text()) if PEERS.exists() else {"versions": {}, "results": {}}
    # One table per version set (tests/models/<set>/, each fixture's "set" and "versions").
    sets: dict[str, dict] = {}
    reasons = {}
    bf16 = []
    layer_rows: list[str] = []
    layer_totals: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as work:
        for fixture in conformance.fixtures():
            stem = fixture["file"].removesuffix(".onnx")
            group = sets.setdefault(fixture["set"], {
                "name": fixture["set"], "versions": manifest["sets"][fixture["set"]]["versions"],
                "rows": [],
                "totals": {"blocks": 0, "ort": 0, "onnx": 0, "onnx_blocks": 0},
                "peers": {p: 0 for p in PEER_NAMES}})
            totals, peer_totals = group["totals"], group["peers"]
            cells = {}
            for target in conformance.TARGETS:
                if target not in conformance.targets_of(fixture):
                    cells[target] = "n/a (opset < 23)"
                    continue
                result = conformance.fuse(cli, conformance.MODELS / fixture["file"], target,
                                          pathlib.Path(work))
                if target == "ort" and fixture["dtype"] == "float32":
                    cuda = conformance.fuse(cli, conformance.MODELS / fixture["file"], target,
                                            pathlib.Path(work), provider="cuda")
                    layer_rows.append(layer_row(stem, result, cuda,
                                                peers["results"].get(stem, {}), layer_totals))
                cells[target] = cell(result.fused, result.blocks)
                totals[target] += result.fused
                if target == "onnx":
                    totals["onnx_blocks"] += result.blocks
                if result.fused < result.blocks:
                    UNFUSED[(stem, target)] = result.blocks - result.fused
                    for r in result.reasons:
                        reasons.setdefault(r, set()).add(f"{stem} ({target})")
            totals["blocks"] += fixture["blocks"]
            if fixture["dtype"] == "bfloat16":
                bf16.append(f"`{stem}` (`--target ort` {cells['ort']}" + (
                    f", `--target onnx` {cells['onnx']})" if "onnx" in
                    conformance.targets_of(fixture) else ")"))
            peer_results = peers["results"].get(stem, {})
            for p in PEER_NAMES:
                r = peer_results.get(p)
                if r and not r.get("error") and r.get("matches") is not False:
                    peer_totals[p] += r["fused"]
            group["rows"].append(f"| `{stem}` | {fixture['exporter']} | {fixture['opset']} | "
                                 f"{fixture['dtype']} | {fixture['blocks']} | {cells['ort']} | "
                                 f"{cells['onnx']} | " +
                                 " | ".join(peer_cell(peer_results.get(p), fixture["blocks"])
                                            for p in PEER_NAMES) + " |")
        precision_lines = precision(cli, peers, pathlib.Path(work), bf16)
        half_lines = half_precision_layers(cli, pathlib.Path(work))
    peer_versions = ", ".join(f"{k} {v}" for k, v in peers["versions"].items()) or "not run"
    overall = {k: sum(g["totals"][k] for g in sets.values()) for k in ("blocks", "ort", "onnx",
                                                                        "onnx_blocks")}
    overall_peers = {p: sum(g["peers"][p] for g in sets.values()) for p in PEER_NAMES}
    out = [
        "# Conformance on real exports",
        "",
        "Generated by `tests/models/make_conformance_table.py` (fusekit columns) and "
        "`tests/models/peers.py` (peer columns); do not edit by hand. Each fixture is a tiny "
        "configuration of the framework's own model code exported by torch "
        "(`tests/models/manifest.json` lists them with one block's op chain). A cell is "
        "attention blocks fused / blocks in the file; ✅ all, ◐ some, ❌ none, ⚠️ fused but "
        "ONNX Runtime's outputs differ from the original's, 💥 the tool failed. Already-fused "
        "blocks (ai.onnx `Attention` written by the dynamo exporter at opset 23) count as fused. "
        "fusekit's results are checked in CI by `tests/python/test_conformance.py` (ONNX Runtime "
        "parity on random inputs for every cell).",
        "",
        f"Peers: {peer_versions}. One table per version set, the versions the fixtures were "
        "exported with; then the same for the float16 models converters make from the newest "
        "set's float32 ones (Precision), with their accuracy against the float32 original.",
        "",
        f"All sets: fusekit `--target ort` {overall['ort']}/{overall['blocks']}, `--target onnx` "
        f"{overall['onnx']}/{overall['onnx_blocks']}; " +
        ", ".join(f"{PEER_NAMES[p]} {n}/{overall['blocks']}" for p, n in overall_peers.items()) +
        ".",
        "",
    ]
    for name, group in sorted(sets.items()):
        totals, peer_totals = group["totals"], group["peers"]
        versions = ", ".join(f"{k} {v}" for k, v in group["versions"].items())
        out += [
            f"## {name}",
            "",
            f"`tests/models/{name}/`, exported with {versions} "
            f"(`tests/models/{manifest['sets'][name]['requirements']}`).",
            "",
            f"Totals: fusekit `--target ort` {totals['ort']}/{totals['blocks']}, `--target onnx` "
            f"{totals['onnx']}/{totals['onnx_blocks']} (opset ≥ 23 fixtures); " +
            ", ".join(f"{PEER_NAMES[p]} {n}/{totals['blocks']}" for p, n in peer_totals.items())
            + " (peers: fused with outputs matching).",
            "",
            "| fixture | exporter | opset | dtype | blocks | fusekit ort | fusekit onnx | " +
            " | ".join(PEER_NAMES.values()) + " |",
            "|---|---|---|---|---|---|---|" + "---|" * len(PEER_NAMES),
            *group["rows"],
            "",
        ]
    out += layer_section(layer_rows, layer_totals) + half_lines
    out += [
        "## Why the rest did not fuse (fusekit's report)",
        "",
    ]
    if not reasons:
        out.append("Every block fused.")
    for reason, where in sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"- {reason}  \n  in: " + ", ".join(f"`{w}`" for w in sorted(where)))
    out += ["", *precision_lines, "", *remaining_section()]
    facts = [facts_vs_ssi.compare(cli, conformance.MODELS / f["file"])
             for f in conformance.fixtures()]
    out += [
        "",
        "## Shape facts against ONNX Runtime's symbolic shape inference",
        "",
        "Dims of every value ONNX Runtime's symbolic shape inference (SSI, `auto_merge`) writes a "
        "shape for, against `fusekit inspect --shapes --json`, both on the file without its "
        "declared value_info and output shapes: SSI-only, dims SSI knows (an integer, or an "
        "expression over the graph inputs' dim_params) and fusekit's facts do not; fusekit-only, "
        "the reverse; disagreements, dims both know that differ; SSI assumed, dims where SSI's "
        "answer rests on an assumption the model does not state (a slice's run-time end taken "
        "as within the dim, where fusekit has the min; two input dim_params auto_merge takes "
        "as one, or an input dim_param for another expression of them; what SSI wrote before it "
        "failed). Where SSI fails, the values it inferred before failing are compared. "
        "`tests/python/test_facts_vs_ssi.py` requires SSI-only and disagreements to be 0 but for "
        "the fixtures it lists with the cause (strict expected failures); "
        "`python tests/python/facts_vs_ssi.py FUSEKIT_CLI MODEL.onnx` lists them.",
        "",
        *facts_vs_ssi.table(facts),
    ]
    left_out = [f"- `{name}/{fixture}`: {why}" for name, s in manifest["sets"].items()
                for fixture, why in s["not_exported"].items()]
    if left_out:
        out += ["", "## Exports left out", "", *left_out]
    manifest_stems = {f["file"].removesuffix(".onnx") for f in conformance.fixtures()}
    errors = [(stem, p, r) for stem, rs in peers["results"].items() for p, r in rs.items()
              if r.get("error") and stem in manifest_stems]
    if errors:
        out += ["", "## Peer failures", ""]
        out += [f"- {PEER_NAMES[p]} on `{stem}`: {r['error']}" for stem, p, r in errors]
    (HERE / "CONFORMANCE.md").write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
