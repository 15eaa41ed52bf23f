"""Differential testing of `fusekit fuse` on random attention blocks (attention_gen.py).

For each case, drawn fusible and then perturbed by its kind, with the target it is fused for:

* fusekit fuses exactly the blocks that break no contract of the target's op (counted in the
  written model), and leaves the others alone; a block left alone fuses once its perturbation is
  undone, so each refusal is shown to come from the perturbation, not from a pattern that never
  matches;
* where a kind names what a fusion must report (a causal mask becoming the op's own, the op a
  target gets, the cache moving into it), the report says so;
* the CLI exits 0 on every model ONNX Runtime loads, and ONNX Runtime loads what it writes;
* the written model computes what the input computes, on random inputs (float16 within a few
  ulps of the output's magnitude);
* a model that is no model (a node input nothing defines) exits 1 with one line naming the file,
  and nothing is written, report included.

FUSEKIT_CLI is the fusekit command line (ctest sets it). FUSEKIT_DIFF_SEED (default 0) and
FUSEKIT_DIFF_ROUNDS (default 4: each kind and target four times) draw other or more cases.
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import onnx
import pytest

import attention_gen as gen
from conformance import FUSED_OPS, session

CLI = os.environ.get("FUSEKIT_CLI", "")
if not CLI:
    raise RuntimeError("FUSEKIT_CLI is not set (run through ctest)")
SEED = int(os.environ.get("FUSEKIT_DIFF_SEED", "0"))
COUNT = int(os.environ.get("FUSEKIT_DIFF_ROUNDS", "4")) * len(gen.TARGETS) * len(gen.KINDS)

# Kinds where today's fusekit breaks the property, each strict: the day the rule is fixed the case
# passes, fails as XPASS, and the entry goes. Keyed by (kind, target); none today.
KNOWN_DEFECTS: dict[tuple[str, str], str] = {}

# float32: the fused kernel reorders the same float32 arithmetic over a few dozen terms.
FP32_RELATIVE = 1e-4
# float16: the unfused graph rounds the scores, the probabilities and the output to float16 (half
# an ulp, 2^-11 relative, each) where the fused kernels keep float32; scales here are at most 1,
# so the logits stay small and 16 ulps (2^-10 each) of the output's magnitude bound the difference.
FP16_RELATIVE = 16 * 2.0**-10
FLOAT64_RELATIVE = 1e-12


def fused_ops(graph: onnx.GraphProto) -> int:
    """Fused attention ops in the graph and in the bodies of its nodes."""
    count = 0
    for node in graph.node:
        count += (node.domain, node.op_type) in FUSED_OPS
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                count += fused_ops(a.g)
    return count


def run_cli(model: onnx.ModelProto, blk: gen.Block, target: str, work: pathlib.Path, stem: str):
    source, out, report = (work / f"{stem}.onnx", work / f"{stem}.fused.onnx",
                           work / f"{stem}.json")
    onnx.save(model, str(source))
    flags = [] if blk.num_heads_flag is None else ["--num-heads", str(blk.num_heads_flag)]
    done = subprocess.run([CLI, "fuse", str(source), "-o", str(out), "--target", target,
                           "--report", str(report), "--quiet", *flags],
                          capture_output=True, text=True, timeout=120)
    return done, source, out, report


def reasons(report: pathlib.Path) -> str:
    rules = json.loads(report.read_text())["rules"]
    return "; ".join(f"[{r['name']}] {m['reason']}" for r in rules for m in r["near_misses"])


def loads(path: pathlib.Path):
    try:
        return session(path, optimize=False)
    except Exception:  # noqa: BLE001 - any refusal means ONNX Runtime cannot load it
        return None


def assert_same_outputs(case: gen.Case, original, fused) -> None:
    feed = gen.feed(case.block, np.random.default_rng(SEED * 100003 + case.index))
    names = [o.name for o in original.get_outputs()]
    assert names == [o.name for o in fused.get_outputs()], "the outputs are not the same"
    for name, x, y in zip(names, original.run(None, feed), fused.run(None, feed)):
        assert x.shape == y.shape and x.dtype == y.dtype, \
            f"output {name}: {y.dtype}{list(y.shape)}, the original {x.dtype}{list(x.shape)}"
        infinite = np.isinf(x)
        assert np.array_equal(np.isnan(x), np.isnan(y)) and \
            np.array_equal(infinite, np.isinf(y)) and np.array_equal(x[infinite], y[infinite]), \
            f"output {name}: NaNs or infinities differ"
        finite = np.isfinite(x)
        relative = {np.dtype(np.float16): FP16_RELATIVE,
                    np.dtype(np.float64): FLOAT64_RELATIVE}.get(x.dtype, FP32_RELATIVE)
        magnitude = float(np.max(np.abs(x[finite].astype(np.float64)), initial=0.0))
        error = float(np.max(np.abs(x[finite].astype(np.float64) - y[finite]), initial=0.0))
        assert error <= relative * max(magnitude, 1.0), \
            f"output {name}: differs by {error:.3g} (magnitude {magnitude:.3g})"


def params():
    out = []
    for case in gen.cases(SEED, COUNT):
        reason = KNOWN_DEFECTS.get((case.kind.name, case.target))
        marks = [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] \
            if reason else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


@pytest.mark.parametrize("case", params())
def test_fuses_exactly_the_contract_and_computes_the_same(case, tmp_path):
    done, source, out, report = run_cli(gen.build(case.block), case.block, case.target,
                                        tmp_path, "case")
    if case.kind.invalid:
        assert done.returncode == 1, f"exit {done.returncode}: {done.stderr}"
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and str(source) in lines[0], done.stderr
        assert not out.exists() and not report.exists(), "written although the CLI failed"
        return

    original = loads(source)
    if done.returncode != 0:
        assert not out.exists() and not report.exists(), "written although the CLI failed"
        assert original is None, f"exit {done.returncode} on a model ONNX Runtime loads: " \
                                 f"{done.stderr.strip()}"
        return
    expected = 0 if case.broken else 1
    got = fused_ops(onnx.load(str(out)).graph)
    why = f"breaks: {case.broken}" if case.broken else "breaks no contract"
    assert got == expected, f"{got} fused ops, {why}; the report: {reasons(report)}"
    if not case.broken:
        fusions = [f for r in json.loads(report.read_text())["rules"] for f in r["matches"]]
        for note, want in case.kind.notes.items():
            want = want[case.target] if isinstance(want, dict) else want
            got = [f["params"].get(note) for f in fusions]
            assert got == [want], f"{note}: {got}"
    if original is not None:
        fused = loads(out)
        assert fused is not None, "ONNX Runtime loads the input but not what fusekit wrote"
        assert_same_outputs(case, original, fused)
    if case.broken:
        # Undone, the perturbation is all that stood in the way.
        twin_done, _, twin_out, twin_report = run_cli(gen.build(case.base), case.base,
                                                      case.target, tmp_path, "twin")
        assert twin_done.returncode == 0, twin_done.stderr
        assert fused_ops(onnx.load(str(twin_out)).graph) == 1, \
            f"the unperturbed block does not fuse either: {reasons(twin_report)}"
