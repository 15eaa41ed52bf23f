"""Conformance on real exports: every fixture of tests/models (torch's exports of F5-TTS, SD3/SD3.5,
Flux, GPT-2, LLaMA and Qwen2, listed in tests/models/manifest.json), for every target that can
express it, fused with the fusekit CLI (FUSEKIT_CLI):

* the original holds the attention blocks the manifest says (a Softmax whose probabilities a
  MatMul multiplies, or an attention op: a top-k router's Softmax is none);
* ONNX Runtime loads the result and it matches the original on random inputs (float16 measured
  against a float32 twin; bfloat16 run by the ONNX reference evaluator), whether or not
  everything fused; where the model takes an attention_mask, also with padded and fully masked
  rows (NaN where the original has NaN);
* fusing the result again changes nothing;
* every Softmax left in the result is named by a near miss (fusekit explains each one it does
  not fuse, attention block or not);
* every block is fused. A fixture whose blocks remain on purpose (conformance.REMAINING, each
  with why it is right that they remain) is a strict expected failure, and the report must give
  the reason written there: the day a rule fuses the blocks, the test passes unexpectedly, fails,
  and the entry goes.

The mixed-precision fixtures converters make from the float32 ones (converted.py) are held to the
same, and to the accuracy of the converted model against its float32 original; those ONNX Runtime
refuses to load (listed in tests/models/converted.json, which must be exact) are run by the ONNX
reference evaluator instead, and those neither runs (type-invalid) are not judged.

FUSEKIT_CONFORMANCE_PART=k/n runs the k-th of n interleaved parts of each test's cases, so that
ctest runs the parts side by side.

FUSEKIT_CONFORMANCE_RUNTIME=off leaves out ONNX Runtime's runs of what the CLI wrote (parity and
loading) and keeps the rest: .ci/run's sanitized build runs the suite so, for its CLI, after the
optimised build of the same source has run it whole.
"""
import fnmatch
import os

import onnx
import pytest

import conformance
import converted

CLI = os.environ.get("FUSEKIT_CLI", "")
if not CLI or not os.access(CLI, os.X_OK):
    raise RuntimeError("FUSEKIT_CLI must name the fusekit tool (the suite runs through ctest)")
_runtime = os.environ.get("FUSEKIT_CONFORMANCE_RUNTIME", "on")
if _runtime not in ("on", "off"):
    raise RuntimeError(f"FUSEKIT_CONFORMANCE_RUNTIME is 'on' or 'off', not {_runtime!r}")
RUNTIME = _runtime == "on"
_part = os.environ.get("FUSEKIT_CONFORMANCE_PART", "1/1")
try:
    PART, PARTS = (int(x) for x in _part.split("/"))
except ValueError:
    PART = PARTS = 0
if not 1 <= PART <= PARTS:
    raise RuntimeError(f"FUSEKIT_CONFORMANCE_PART is k/n with 1 <= k <= n, not {_part!r}")


def part(cases: list) -> list:
    """This part's cases: every n-th, from the k-th (neighbours cost alike, so parts do too)."""
    return cases[PART - 1::PARTS]


class NotAllFused(Exception):
    """Blocks left unfused, with a near-miss reason for them: what an expected failure expects."""


def expected_reason(fixture, target):
    entry = conformance.remaining_for(fixture, target)
    return entry.reason if entry else None


def cases():
    out = []
    for fixture in converted.judged_fixtures():
        for target in conformance.targets_of(fixture):
            reason = expected_reason(fixture, target)
            marks = [pytest.mark.xfail(strict=True, raises=NotAllFused, reason=reason)] \
                if reason else []
            out.append(pytest.param(fixture, target, marks=marks,
                                    id=f"{fixture['file'].removesuffix('.onnx')}-{target}"))
    return part(out)


def test_every_pattern_matches_a_fixture():
    # An entry that matches nothing would silently expect nothing.
    pairs = [(f["file"].removesuffix(".onnx"), t) for f in converted.judged_fixtures()
             for t in conformance.targets_of(f)]
    for r in conformance.REMAINING:
        assert any(fnmatch.fnmatchcase(s, r.fixtures) and fnmatch.fnmatchcase(t, r.target)
                   for s, t in pairs), (r.fixtures, r.target)


@pytest.mark.parametrize("fixture,target", cases())
def test_fixture(fixture, target, tmp_path):
    source = converted.source_of(fixture)
    result = conformance.fuse(CLI, source, target, tmp_path)
    assert result.blocks == fixture["blocks"], "the file's attention blocks and the manifest's"

    if RUNTIME:
        conformance.compare(fixture, result.output, source=source)

    # No Softmax passed over in silence: each left is named by a near miss.
    assert not conformance.unexplained_softmaxes(result), \
        f"Softmax nodes no near miss names: {conformance.unexplained_softmaxes(result)}"

    again = conformance.fuse(CLI, result.output, target, tmp_path / "again")
    assert again.output.read_bytes() == result.output.read_bytes(), "a second run changed it"

    if result.fused < result.blocks:
        anchors = {m["anchor"] for r in result.report["rules"] for m in r["near_misses"]}
        assert len(anchors) >= result.blocks - result.fused, (
            f"{result.blocks - result.fused} blocks left unfused but the report names "
            f"{len(anchors)} near misses: {result.reasons}")
        expected = expected_reason(fixture, target)
        if expected is not None:
            assert any(expected in r for r in result.reasons), (
                f"the report does not give the expected reason {expected!r}: {result.reasons}")
        raise NotAllFused(f"{result.fused} of {result.blocks} blocks fused; "
                          f"{result.reasons[0] if result.reasons else 'no reason'}")
    assert result.fused == result.blocks
    # Everything fused: a near miss now would be noise (a rule stopping at a fused op).
    assert not result.reasons, result.reasons


@pytest.mark.parametrize("fixture", part([pytest.param(f, id=f["file"].removesuffix(".onnx"))
                                          for f in conformance.fixtures()]))
def test_target_onnx_writes_standard_ops(fixture, tmp_path):
    # --target onnx is for the runtimes other than ONNX Runtime: what fuses there (Attention,
    # LayerNormalization, Gelu … where the model's opset has them) and every clean-up keeps to
    # the standard domain and those the model imported already, at every opset, and computes
    # what the original does.
    source = conformance.MODELS / fixture["file"]
    result = conformance.fuse(CLI, source, "onnx", tmp_path)
    imported = {n.domain for n in onnx.load(str(source)).graph.node}
    written = {n.domain for n in onnx.load(str(result.output)).graph.node}
    assert written - imported <= {"", "ai.onnx"}, f"ops of {written - imported} written"
    if RUNTIME:
        conformance.compare(fixture, result.output, source=source)


# Why --provider cuda may fuse fewer attention blocks than the default: ONNX Runtime's CUDA
# GroupQueryAttention, the one op that caps scores as Gemma 2 does, takes no attention bias and
# has no float32 kernel.
CUDA_REFUSALS = ("CUDA GroupQueryAttention takes no attention bias",
                 "CUDA GroupQueryAttention has no float32 kernel")


@pytest.mark.parametrize("fixture", part([pytest.param(f, id=f["file"].removesuffix(".onnx"))
                                          for f in converted.judged_fixtures()]))
def test_cuda_provider(fixture, tmp_path):
    # What --provider cuda fuses otherwise than the default (a residual sum read on, folded into
    # the skip norms' output 3; a decode step's mask or a float32 block not given to
    # GroupQueryAttention; the norms, GELUs and rotations of a float16 or bfloat16 model)
    # computes what the original does; where nothing differs, the two models are the same bytes
    # and test_fixture has judged them. ONNX Runtime's CPU provider runs the half-precision ops
    # (a GELU cast to float32 and back) or, for bfloat16, the reference evaluator does.
    source = converted.source_of(fixture)
    default = conformance.fuse(CLI, source, "ort", tmp_path)
    cuda = conformance.fuse(CLI, source, "ort", tmp_path, provider="cuda")
    if cuda.output.read_bytes() == default.output.read_bytes():
        return
    if cuda.fused != default.fused:
        new = [r for r in cuda.reasons if r not in default.reasons]
        assert cuda.fused < default.fused and new and all(
            any(why in r for why in CUDA_REFUSALS) for r in new), (
            f"the provider changed which attention blocks fused: {new}")
    # A half-precision model as the CUDA provider runs it, every op in its own type: there the
    # fused layer ops (float32 inside, one rounding) are never the less accurate form.
    half = fixture["dtype"] != "float32"
    if RUNTIME:
        conformance.compare(fixture, cuda.output, source=source, per_op=half)
        if half and not conformance.by_reference(fixture):
            # Judged by the reference evaluator, it must still load where the original does:
            # every node's schema and types hold in ONNX Runtime.
            conformance.session(cuda.output)
    again = conformance.fuse(CLI, cuda.output, "ort", tmp_path / "again", provider="cuda")
    assert again.output.read_bytes() == cuda.output.read_bytes(), "a second run changed it"


@pytest.mark.parametrize("fixture", part([f for f in converted.fixtures()
                                          if f["file"] in converted.unloadable()]),
                         ids=lambda f: f["file"].removesuffix(".onnx"))
def test_refused_conversion(fixture):
    # The list of converted files ONNX Runtime refuses is exact: each is refused, for the reason
    # recorded (every other one is run by ONNX Runtime above, and fails there if it is refused),
    # and the reference evaluator fails on those recorded invalid, for the reason recorded.
    path = converted.path_of(fixture)
    assert converted.load_error(path) == converted.unloadable()[fixture["file"]]
    assert converted.reference_error(fixture, path) == converted.invalid().get(fixture["file"])
