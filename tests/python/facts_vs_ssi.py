"""fusekit's facts oracle against ONNX Runtime's symbolic shape inference (SSI), dim by dim.

    python tests/python/facts_vs_ssi.py FUSEKIT_CLI MODEL.onnx [...] [--table] [--kinds N]
                                        [--declared]

For every value SSI writes a shape for (the main graph's inputs, outputs and value_info), each dim
is compared with what `fusekit inspect MODEL --shapes --json` says:

  SSI-only      SSI knows the dim and fusekit does not (a value whose rank fusekit does not know
                counts every dim SSI knows): what facts could still learn;
  fusekit-only  fusekit knows it and SSI does not;
  disagreement  both know it and the two differ (or the ranks differ): one of them is wrong;
  assumed       SSI's answer rests on an assumption the model does not state, so it is no
                knowledge: fusekit has min(x, y) for a slice up to a run-time end and SSI has x or
                y (SSI takes the end as within the dim); a dim_param of the graph inputs that
                SSI's auto_merge took for another expression of them; or, where SSI raised, what it had
                written before failing that differs from fusekit.

A dim is known when it is an integer, or an expression whose every symbol is a dim_param of the
original model's graph inputs: the names SSI invents for what it does not know (`unk__3`,
`Reshape_12_o0__d1`) are not knowledge, and neither are fusekit's names for sizes nothing names
(null in its JSON). The same rule holds on both sides.

By default both run on the model without the value_info and output shapes it declares, since
fusekit takes declarations as facts and the comparison is about what each infers; --declared
keeps them. Where SSI raises, the failure is recorded and the values it had inferred before the
failing node are compared (its run is repeated step by step through its own driver for that).

Needs onnx, onnxruntime (with sympy) and the fusekit CLI; the project's .venv has them.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import logging
import pathlib
import re
import subprocess
import sys
import tempfile

import onnx
import sympy
from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

# SSI logs a warning per node it cannot follow; the comparison reports those dims itself.
logging.getLogger("onnxruntime.tools.symbolic_shape_infer").setLevel(logging.ERROR)

EXAMPLES = 20

# Functions SSI writes into dim_params (floor(S/2), Max(S, 1)); every other name is a symbol.
SYMPY_FUNCTIONS = {"floor": sympy.floor, "ceiling": sympy.ceiling, "Max": sympy.Max,
                   "Min": sympy.Min, "Max": sympy.Max, "Mod": sympy.Mod, "Abs": sympy.Abs, "sqrt": sympy.sqrt}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass
class Entry:
    """One dim the two sides see differently."""
    value: str
    dim: int | None  # None: the rank itself
    ssi: str
    fusekit: str
    op: str  # the value's producer: an op type, "graph input" or "initializer"
    kind: str  # for grouping: what SSI had against what fusekit had
    first: bool = True  # no input of the producer is itself an SSI-only miss: where a loss starts

    def line(self) -> str:
        where = "rank" if self.dim is None else f"dim {self.dim}"
        return f"{self.value}: {where}: ssi={self.ssi}, fusekit={self.fusekit}  [{self.op}]"


@dataclasses.dataclass
class Comparison:
    model: str
    ssi_error: str | None = None  # SSI raised; what follows is from the values it had inferred
    values: int = 0  # values compared
    ssi_only: list[Entry] = dataclasses.field(default_factory=list)
    fusekit_only: list[Entry] = dataclasses.field(default_factory=list)
    disagreements: list[Entry] = dataclasses.field(default_factory=list)
    assumed: list[Entry] = dataclasses.field(default_factory=list)

    def counts(self) -> tuple[int, int, int]:
        return len(self.ssi_only), len(self.fusekit_only), len(self.disagreements)


class Dims:
    """Dim texts of one model as sympy expressions, and whether they count as known."""

    def __init__(self, model: onnx.ModelProto):
        graph = model.graph
        self.inputs = {d.dim_param for vi in graph.input for d in _tensor_dims(vi) if d.dim_param}
        every = {d.dim_param for vi in (*graph.input, *graph.output, *graph.value_info)
                 for d in _tensor_dims(vi) if d.dim_param}
        # A dim_param that is not an identifier ("batch size", "seq-len") is read through a
        # stand-in name, longest first so that no name is replaced inside a longer one.
        # A dim_param that reads as an expression is one (the dynamo exporter writes some,
        # "Min(64, s53)"); stand-ins are for the rest.
        self.stand_ins = {name: f"__dim_param_{i}" for i, name in
                          enumerate(sorted((n for n in every if not IDENTIFIER.fullmatch(n)
                                            and self._parse(n) is None),
                                           key=len, reverse=True))}
        self.input_symbols = {sympy.Symbol(self.stand_ins.get(n, n)) for n in self.inputs}
        self.cache: dict[str, sympy.Expr | None] = {}

    def parse(self, text: str) -> sympy.Expr | None:
        """The expression, or None where sympy cannot read it."""
        if text in self.cache:
            return self.cache[text]
        source = text
        for name, stand_in in self.stand_ins.items():
            text = text.replace(name, stand_in)
        expr = self._parse(text)
        self.cache[source] = expr
        return expr

    @staticmethod
    def _parse(text: str) -> sympy.Expr | None:
        local = {}
        for name in IDENTIFIER.findall(text):
            if name in SYMPY_FUNCTIONS:
                local[name] = SYMPY_FUNCTIONS[name]
            else:
                # Every other name a symbol, so that sympy's own (E, I, N, S, Q) never stand in.
                local[name] = sympy.Symbol(name)
        try:
            expr = sympy.parse_expr(text, local_dict=local, global_dict={
                "Integer": sympy.Integer, "Symbol": sympy.Symbol, "Rational": sympy.Rational,
                "Float": sympy.Float})
        except Exception:  # noqa: BLE001 (an unreadable dim is an unknown one)
            expr = None
        return expr

    def known(self, dim: int | str | None) -> sympy.Expr | None:
        """The dim as an expression where it is known: an integer, or over input dim_params."""
        if dim is None:
            return None
        if isinstance(dim, int):
            return sympy.Integer(dim)
        expr = self.parse(dim)
        if expr is None or not expr.free_symbols <= self.input_symbols:
            return None
        return expr


def _tensor_dims(vi: onnx.ValueInfoProto):
    t = vi.type
    if t.HasField("tensor_type") and t.tensor_type.HasField("shape"):
        return list(t.tensor_type.shape.dim)
    return []


def _shape(vi: onnx.ValueInfoProto) -> list[int | str | None] | None:
    t = vi.type
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    out = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(d.dim_value)
        elif d.HasField("dim_param"):
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def run_ssi(model: onnx.ModelProto) -> tuple[dict[str, list | None], str | None]:
    """SSI's shapes of the main graph's values by name, and its error where it raised."""
    error = None
    # SSI saves its partial model into the working directory when it gives up.
    with tempfile.TemporaryDirectory() as scratch, contextlib.chdir(scratch):
        try:
            inferred = SymbolicShapeInference.infer_shapes(model, auto_merge=True,
                                                           guess_output_rank=False)
            if inferred is None:
                return {}, "SSI returned nothing (opset below 7)"
            vis = [*inferred.graph.input, *inferred.graph.output, *inferred.graph.value_info]
            return {vi.name: _shape(vi) for vi in vis}, None
        except Exception as e:  # noqa: BLE001 (any failure of SSI is recorded, not raised)
            error = _failure(e)
        # The same run step by step, keeping what it had inferred when it failed (ORT 1.23's
        # driver; where that changes, the failure alone is recorded).
        try:
            ssi = SymbolicShapeInference(2**31 - 1, True, False, 0)
            ssi._preprocess(model)
            try:
                while ssi.run_:
                    ssi._infer_impl()
            except Exception:  # noqa: BLE001, S110 (the failure is the one recorded above)
                pass
            initializers = {t.name for t in model.graph.initializer}
            return {name: _shape(vi) for name, vi in ssi.known_vi_.items()
                    if name not in initializers}, error
        except Exception:  # noqa: BLE001
            return {}, error


def _failure(e: Exception) -> str:
    """"AssertionError in _infer_Attention at Attention 'node_attention'": the exception, the
    SSI function that raised it and the node SSI was inferring (from the traceback's frames)."""
    text = f"{type(e).__name__}: {e}".strip().rstrip(":")
    where, node = None, None
    tb = e.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_infer_impl" and "node" in frame.f_locals:
            node = frame.f_locals["node"]
        if not frame.f_code.co_name.startswith("<"):  # not a comprehension's own frame
            where = frame.f_code.co_name
        tb = tb.tb_next
    if where:
        text += f" in {where}"
    if node is not None and hasattr(node, "op_type"):
        text += f" at {node.op_type} '{node.name}'"
    return text


def run_fusekit(cli: str, path: pathlib.Path) -> dict:
    done = subprocess.run([cli, "inspect", str(path), "--shapes", "--json"], capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{cli} inspect {path} --shapes --json exited {done.returncode}: "
                           f"{done.stderr.strip()}")
    return json.loads(done.stdout)


def producers(model: onnx.ModelProto) -> dict[str, tuple[str, list[str]]]:
    """Per value its producer's op type ("graph input", "initializer") and the producer's inputs."""
    out = {vi.name: ("graph input", []) for vi in model.graph.input}
    out.update({t.name: ("initializer", []) for t in model.graph.initializer})
    for node in model.graph.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        out.update({name: (op, [i for i in node.input if i]) for name in node.output if name})
    return out


def undeclared(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model without the shapes it declares beyond its inputs' (value_info, the outputs'
    dims): what both tools then say is what they infer."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.ClearField("value_info")
    for o in out.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    return out


def compare(cli: str, path: str | pathlib.Path, declared: bool = False) -> Comparison:
    """Compares the two on the model at `path`; with `declared`, on the model as it is, else
    on the model without its declared value_info and output shapes (see undeclared())."""
    path = pathlib.Path(path)
    model = onnx.load(str(path))
    dims = Dims(model)
    made_by = producers(model)
    with tempfile.TemporaryDirectory() as work:
        if not declared:
            model = undeclared(model)
            path_seen = pathlib.Path(work) / path.name
            onnx.save(model, str(path_seen))
        else:
            path_seen = path
        ssi, error = run_ssi(model)
        facts = run_fusekit(cli, path_seen)
    result = Comparison(f"{path.parent.name}/{path.name}", error)

    def text(d):
        return "?" if d is None else str(d)

    for name, ssi_shape in ssi.items():
        if ssi_shape is None:
            continue  # SSI knows nothing of it
        result.values += 1
        op = made_by.get(name, ("?", []))[0]
        entry = facts.get(name)
        fk_shape = entry["dims"] if entry else None
        if fk_shape is None:
            for i, d in enumerate(ssi_shape):
                s = dims.known(d)
                if s is not None:
                    why = "rank unknown" if entry else "no such value"
                    result.ssi_only.append(Entry(name, i, str(d), why, op,
                                                 f"{_what(s)} / fusekit {why}"))
            continue
        if len(fk_shape) != len(ssi_shape):
            entry = Entry(name, None, str(len(ssi_shape)), str(len(fk_shape)), op, "rank")
            (result.assumed if error else result.disagreements).append(entry)
            continue
        for i, (sd, fd) in enumerate(zip(ssi_shape, fk_shape)):
            s, f = dims.known(sd), dims.known(fd)
            if s is not None and f is None:
                if fd is not None and _assumed(s, dims.parse(fd), dims):
                    result.assumed.append(Entry(name, i, str(sd), str(fd), op, "assumed"))
                else:
                    result.ssi_only.append(Entry(name, i, str(sd), text(fd), op,
                                                 f"{_what(s)} / fusekit dim unknown"))
            elif f is not None and s is None:
                result.fusekit_only.append(Entry(name, i, text(sd), str(fd), op,
                                                 f"fusekit {_what(f)} / SSI unknown"))
            elif s is not None and f is not None and not _same(s, f):
                entry = Entry(name, i, str(sd), str(fd), op, "differ")
                (result.assumed if error or _assumed(s, f, dims) else
                 result.disagreements).append(entry)
    missed = {e.value for e in result.ssi_only}
    for e in result.ssi_only:
        e.first = not any(i in missed for i in made_by.get(e.value, ("?", []))[1])
    return result


def _assumed(ssi: sympy.Expr, fusekit: sympy.Expr | None, dims: Dims) -> bool:
    """Where SSI's dim rests on an assumption: fusekit's is a min or a max and SSI's one of its
    operands (x[s:] of a dim d: SSI takes d − s, as if s ≤ d; fusekit max(0, d − s)), or SSI's is a
    dim_param of the graph inputs and fusekit's another expression of them (a decode step's
    total_sequence against past_sequence + 1), which only auto_merge equates."""
    if fusekit is None:
        return False
    if isinstance(fusekit, (sympy.Min, sympy.Max)):
        return any(_same(ssi, a) for a in fusekit.args)
    # max(0, d − s) inside a product or sum (batch · max(0, d − s) rows): SSI's d − s there too.
    within = fusekit.replace(lambda e: isinstance(e, sympy.Max) and 0 in e.args,
                             lambda e: next(a for a in e.args if a != 0))
    if within != fusekit and _same(ssi, within):
        return True
    return (ssi.is_Symbol and ssi in dims.input_symbols and not _same(ssi, fusekit) and
            fusekit.free_symbols <= dims.input_symbols)


def _what(expr: sympy.Expr) -> str:
    return "constant" if expr.is_number else "symbolic"


def _same(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.is_Integer and b.is_Integer:
        return a == b
    return sympy.simplify(a - b) == 0


def report(c: Comparison) -> str:
    a, b, d = c.counts()
    lines = [f"{c.model}: {c.values} values; SSI-only dims {a}, fusekit-only dims {b}, "
             f"disagreements {d}"]
    if c.ssi_error:
        lines.append(f"  SSI failed ({c.ssi_error}); compared what it inferred before")
    if c.assumed:
        lines.append(f"  SSI assumed {len(c.assumed)} dims (not counted), e.g. {c.assumed[0].line()}")
    for title, entries in (("SSI-only", c.ssi_only), ("disagreements", c.disagreements)):
        if entries:
            lines.append(f"  {title}:")
            lines += [f"    {e.line()}" for e in entries[:EXAMPLES]]
            if len(entries) > EXAMPLES:
                lines.append(f"    … and {len(entries) - EXAMPLES} more")
    return "\n".join(lines)


def table(comparisons: list[Comparison]) -> list[str]:
    """The markdown table: one row per model."""
    rows = ["| fixture | SSI-only dims | fusekit-only dims | disagreements | SSI assumed |",
            "|---|---|---|---|---|"]
    for c in comparisons:
        a, b, d = c.counts()
        note = f" (SSI failed: {_short(c.ssi_error)})" if c.ssi_error else ""
        rows.append(f"| `{c.model.removesuffix('.onnx')}`{note} | {a} | {b} | {d} | "
                    f"{len(c.assumed)} |")
    return rows


def _short(error: str) -> str:
    first = error.splitlines()[0] if error else ""
    return first if len(first) <= 100 else first[:99] + "…"


def kinds(comparisons: list[Comparison], top: int) -> list[str]:
    """The most common kinds of SSI-only dims and disagreements over all models (producer op,
    what SSI had and what fusekit had), with how many of them start a loss (no input of the
    producer missed already) and one example, of a start where there is one."""
    count, first = collections.Counter(), collections.Counter()
    example = {}
    models = collections.defaultdict(set)
    for c in comparisons:
        for e in (*c.ssi_only, *c.disagreements):
            key = (e.op, e.kind)
            count[key] += 1
            first[key] += e.first
            if key not in example or (e.first and not example[key][0]):
                example[key] = (e.first, f"{c.model}: {e.line()}")
            models[key].add(c.model)
    lines = ["| dims | first | producer | SSI / fusekit | models | example |",
             "|---|---|---|---|---|---|"]
    for key, n in count.most_common(top):
        op, kind = key
        lines.append(f"| {n} | {first[key]} | {op} | {kind} | {len(models[key])} | "
                     f"`{example[key][1]}` |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cli", help="the fusekit tool")
    parser.add_argument("models", nargs="+", type=pathlib.Path)
    parser.add_argument("--table", action="store_true", help="a markdown table of the counts only")
    parser.add_argument("--declared", action="store_true",
                        help="keep the value_info and output shapes the model declares (fusekit "
                             "takes them as facts; SSI infers anyway)")
    parser.add_argument("--kinds", type=int, default=0, metavar="N",
                        help="also the N most common kinds of SSI-only dims and disagreements")
    args = parser.parse_args(argv)
    comparisons = [compare(args.cli, m, args.declared) for m in args.models]
    if args.table:
        print("\n".join(table(comparisons)))
    else:
        print("\n".join(report(c) for c in comparisons))
    if args.kinds:
        print("\nmost common kinds (first: where the loss starts, no input of the producer "
              "missed already):")
        print("\n".join(kinds(comparisons, args.kinds)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
