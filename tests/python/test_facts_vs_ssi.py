"""fusekit's facts against ONNX Runtime's symbolic shape inference on every fixture of tests/models
(facts_vs_ssi.py does the comparison, on the models without their declared value_info):

* every dim SSI knows, fusekit knows too;
* where both know a dim, they agree.

A dim where SSI is wrong is listed in SSI_WRONG with the reason, checked by hand; nothing else is
excused. Dims fusekit knows and SSI does not are fine. Where SSI raises, the values it inferred
before the failing node are compared.

Run through ctest (test facts_vs_ssi), which names the CLI in FUSEKIT_CLI:

    FUSEKIT_CLI=build/test/examples/fusekit \
        .venv/bin/python -m pytest tests/python/test_facts_vs_ssi.py
"""
import fnmatch
import os

import pytest

import conformance
import facts_vs_ssi

CLI = os.environ.get("FUSEKIT_CLI", "")
if not CLI or not os.access(CLI, os.X_OK):
    raise RuntimeError("FUSEKIT_CLI must name the fusekit tool (the suite runs through ctest)")

# (fixture pattern, value name, dim index or None for the rank) → why SSI is wrong there.
SSI_WRONG: dict[tuple[str, str, int | None], str] = {
    # The shifted windows' mask expanded to the batch: Expand([1, 16, 1, 16, 16] mask,
    # Concat(Shape(pixel_values)[0:1], one, one, one, one)), the same [1] initializer four times.
    # The target has five elements and the mask five dims: the output is 5-D, as ONNX Runtime
    # runs it; SSI gives it 8.
    ("transformers-5.24/swin_eager.dynamo18*", "expand", None):
        "a Concat reading one value four times, read as 8 dims",
    ("transformers-5.24/swin_eager.dynamo18*", "expand_1", None):
        "a Concat reading one value four times, read as 8 dims",
}

# Fixture pattern → what facts do not know yet there, which SSI gives: each a strict expected
# failure, so that the entry goes when facts learn it.
NOT_KNOWN_YET: dict[str, str] = {
    # transformers 5's OPT masks total_sequence keys (attention_mask's), the cache holds
    # past_sequence + max(0, total_sequence - past_sequence): one length only where the model
    # runs, which SSI merges into one name and facts leave unknown.
    "transformers-5.*/opt_decode.ts17*": "a broadcast of two lengths the model runs only with equal",
    # GPT-2 4.49 slices its causal buffer [P : P + 1] of 64 rows, Min(64, ·) arithmetic sym has
    # no form for.
    "transformers-4.49/gpt2_eager_decode.ts17*": "min arithmetic",
    # ALiBi's key length is the mask's (total_sequence), the scores' past_sequence + 1: their sum
    # has one where the model runs, which SSI merges into one name and facts leave unknown.
    "*/bloom_decode.ts17*": "a broadcast of two lengths the model runs only with equal",
    # GPTBigCode 4.49's multi-query cache is one tensor for k and v, split by a Slice of a
    # run-time size.
    "transformers-4.49/gpt_bigcode_decode.ts17*": "a Slice of a run-time size",
}

# Every fixture the manifest lists and every file there: a missing one fails, never skips.
FIXTURES = sorted({f["file"] for f in conformance.fixtures()} |
                  {str(p.relative_to(conformance.MODELS)) for p in conformance.MODELS.glob("*/*.onnx")})


def excused(stem, entry):
    return any(fnmatch.fnmatchcase(stem, name) and entry.value == value and entry.dim == dim
               for name, value, dim in SSI_WRONG)


def test_fixtures_present():
    assert FIXTURES, f"no fixtures in {conformance.MODELS}"
    missing = [f for f in FIXTURES if not (conformance.MODELS / f).is_file()]
    assert not missing, f"fixtures the manifest lists are missing: {missing}"


def test_every_exception_matches_a_fixture():
    # An entry that matches nothing would silently excuse nothing.
    stems = [f.removesuffix(".onnx") for f in FIXTURES]
    for name, _, _ in SSI_WRONG:
        assert any(fnmatch.fnmatchcase(s, name) for s in stems), name


def gap_of(fixture):
    return next((why for name, why in NOT_KNOWN_YET.items()
                 if fnmatch.fnmatchcase(fixture.removesuffix(".onnx"), name)), None)


def test_every_gap_matches_a_fixture():
    stems = [f.removesuffix(".onnx") for f in FIXTURES]
    for name in NOT_KNOWN_YET:
        assert any(fnmatch.fnmatchcase(s, name) for s in stems), name


@pytest.mark.parametrize("fixture", [
    pytest.param(f, marks=[pytest.mark.xfail(strict=True, reason=gap_of(f))] if gap_of(f) else [])
    for f in FIXTURES], ids=lambda f: f.removesuffix(".onnx"))
def test_fixture(fixture):
    result = facts_vs_ssi.compare(CLI, conformance.MODELS / fixture)
    stem = fixture.removesuffix(".onnx")
    ssi_only = [e for e in result.ssi_only if not excused(stem, e)]
    disagreements = [e for e in result.disagreements if not excused(stem, e)]
    result.ssi_only, result.disagreements = ssi_only, disagreements
    if ssi_only or disagreements:
        pytest.fail(facts_vs_ssi.report(result), pytrace=False)
