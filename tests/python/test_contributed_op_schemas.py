"""fusekit's onnx schemas of ONNX Runtime's contrib ops (include/fusekit/graph/
contributed_op_schemas.hpp) against the installed ONNX Runtime's own registrations, field by field:
each is the newest version of its op that ONNX Runtime registers (or, for an op onnx defines from a
later opset, the version ONNX Runtime adds below it), with the same inputs and outputs
(names, options, type strings, types), attributes (type, required, default) and type constraints,
so that the checker holds fused nodes to the contract ONNX Runtime runs them by. Descriptions and
shape inference are not part of the contract.

Run through ctest (test contributed_op_schemas_vs_ort), which names the dump program in
FUSEKIT_SCHEMA_DUMP:

    FUSEKIT_SCHEMA_DUMP=build/tests/dump_contributed_op_schemas \
        .venv/bin/python -m pytest tests/python/test_contributed_op_schemas.py
"""
import json
import os
import subprocess

import onnx
import onnx.helper
import onnxruntime
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

DUMP = os.environ.get("FUSEKIT_SCHEMA_DUMP", "")
if not DUMP or not os.access(DUMP, os.X_OK):
    raise RuntimeError("FUSEKIT_SCHEMA_DUMP must name dump_contributed_op_schemas "
                       "(the suite runs through ctest)")

FUSEKIT = json.loads(subprocess.run([DUMP], check=True, capture_output=True, text=True).stdout)
ORT = f"ONNX Runtime {onnxruntime.__version__}"


def op_id(schema):
    return f"{schema['domain'] or 'ai.onnx'}::{schema['name']}"


def ort_schemas():
    """ONNX Runtime's schemas by (domain, name): the newest, and each by its since_version."""
    newest, every = {}, {}
    for s in ort_state.get_all_operator_schema():
        every[s.domain, s.name, s.since_version] = s
        if (s.domain, s.name) not in newest or s.since_version > newest[s.domain, s.name].since_version:
            newest[s.domain, s.name] = s
    return newest, every


NEWEST, EVERY = ort_schemas()


def parameters(formal_parameters):
    return [{"name": p.name, "option": p.option.name, "isHomogeneous": p.isHomogeneous,
             "typeStr": p.typeStr, "types": sorted(p.types)} for p in formal_parameters]


def default(serialized):
    """The default that ONNX Runtime gives as a serialized AttributeProto; None where it has none."""
    if not serialized:
        return None
    return onnx.helper.get_attribute_value(onnx.AttributeProto.FromString(serialized))


def as_fusekit_writes(s):
    """ONNX Runtime's schema in the form dump_contributed_op_schemas writes."""
    return {
        "name": s.name,
        "domain": s.domain,
        "since_version": s.since_version,
        "deprecated": s.deprecated,
        "support_level": s.support_level.name,
        "min_input": s.min_input,
        "max_input": s.max_input,
        "min_output": s.min_output,
        "max_output": s.max_output,
        "inputs": parameters(s.inputs),
        "outputs": parameters(s.outputs),
        "attributes": [{"name": a.name, "type": a.type.name, "required": a.required,
                        "default": default(a._default_value)}
                       for a in sorted(s.attributes.values(), key=lambda a: a.name)],
        "type_constraints": [{"type_param_str": t.type_param_str,
                              "allowed_type_strs": list(t.allowed_type_strs)}
                             for t in s.type_constraints],
    }


def first_difference(path, ours, theirs):
    """Where `ours` and `theirs` first differ, as one line; None where they are equal."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in list(ours) + [k for k in theirs if k not in ours]:
            if key not in theirs:
                return f"{path}.{key}: fusekit has {ours[key]!r}, {ORT} has no such field"
            if key not in ours:
                return f"{path}.{key}: fusekit has no such field, {ORT} has {theirs[key]!r}"
            found = first_difference(f"{path}.{key}", ours[key], theirs[key])
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            found = first_difference(f"{path}[{i}]", a, b)
            if found:
                return found
        if len(ours) != len(theirs):
            extra, whose = (ours, "fusekit") if len(ours) > len(theirs) else (theirs, ORT)
            return (f"{path}: fusekit has {len(ours)} entries, {ORT} has {len(theirs)}; "
                    f"{whose} also has {extra[min(len(ours), len(theirs))]!r}")
        return None
    if type(ours) is not type(theirs) or ours != theirs:
        return f"{path}: fusekit has {ours!r}, {ORT} has {theirs!r}"
    return None


def test_one_schema_per_op():
    ids = [op_id(s) for s in FUSEKIT]
    assert len(ids) == len(set(ids)), f"an op has two schemas: {sorted(ids)}"


@pytest.mark.parametrize("ours", FUSEKIT, ids=op_id)
def test_schema_is_onnx_runtimes(ours):
    # The newest, or for an op onnx defines from a later opset (LayerNormalization) the version
    # ONNX Runtime adds below it.
    theirs = EVERY.get((ours["domain"], ours["name"], ours["since_version"]),
                       NEWEST.get((ours["domain"], ours["name"])))
    assert theirs is not None, f"{op_id(ours)}: {ORT} registers no such op"
    difference = first_difference(op_id(ours), ours, as_fusekit_writes(theirs))
    assert difference is None, difference
