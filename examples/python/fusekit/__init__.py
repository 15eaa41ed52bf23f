"""fusekit: fuse the attention blocks of ONNX models, and say why the near misses did not fuse.

    import onnx, fusekit
    fused, report = fusekit.fuse(onnx.load("model.onnx"))
    report = fusekit.fuse_file("model.onnx", "fused.onnx")   # external data kept valid
    fusekit.inspect("model.onnx")["attention_blocks"]

The report is the dict ``fusekit fuse IN -o OUT --report R.json`` writes. Every failure raises
:class:`fusekit.Error` with the one line the ``fusekit`` command prints, and writes nothing.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union

from . import _core
from ._core import Error

if TYPE_CHECKING:
    import onnx

__version__: str = _core.__version__
__all__ = ["Error", "fuse", "fuse_file", "inspect", "__version__"]

Error.__module__ = __name__
Error.__doc__ = "A model fusekit could not read, fuse or write; the message is one line."

_TARGETS = ("ort", "onnx")


def _rules(rules: Union[None, str, Sequence[str]]) -> Optional[list]:
    if rules is None or rules == "all":
        return None
    if isinstance(rules, str):
        return [r for r in rules.split(",") if r] or [""]
    return [str(r) for r in rules]


def _num_heads(num_heads: Optional[int]) -> Optional[int]:
    if num_heads is None:
        return None
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(f"num_heads is an int or None, not {type(num_heads).__name__}")
    if num_heads <= 0 or num_heads >= 2**31:
        raise Error(f"--num-heads needs a positive integer below 2^31, not '{num_heads}'")
    return num_heads


def _is_model_proto(model: Any) -> bool:
    # Checked by name: importing onnx only when a ModelProto may be at hand keeps `import fusekit`
    # fast.
    t = type(model)
    return t.__name__ == "ModelProto" and t.__module__.startswith("onnx")


def _load_proto(data: bytes, directory: Optional[str]) -> "onnx.ModelProto":
    # Imported here, where a ModelProto is returned: bytes in, bytes out does without it.
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    if directory is not None:
        from onnx.external_data_helper import load_external_data_for_model, uses_external_data

        def tensors(graph):
            yield from graph.initializer
            for node in graph.node:
                for attr in node.attribute:
                    if attr.HasField("t"):
                        yield attr.t
                    yield from attr.tensors
                    if attr.HasField("g"):
                        yield from tensors(attr.g)
                    for g in attr.graphs:
                        yield from tensors(g)

        if any(uses_external_data(t) for t in tensors(model.graph)):
            load_external_data_for_model(model, directory)
    return model


def fuse(
    model: Union["onnx.ModelProto", bytes, str, "os.PathLike[str]"],
    *,
    target: str = "ort",
    provider: Optional[str] = None,
    rules: Union[None, str, Sequence[str]] = None,
    num_heads: Optional[int] = None,
    explain: bool = False,
) -> Tuple[Union["onnx.ModelProto", bytes], Dict[str, Any]]:
    """Fuses every attention block the rules match and returns ``(fused model, report)``.

    ``model`` is an ``onnx.ModelProto``, the model serialised (``bytes``), or the path of a model
    file. The fused model comes back as it was given: a ModelProto for a ModelProto or a path (its
    external data loaded, as ``onnx.load`` does), bytes for bytes. The input is not modified.

    ``target``: ``"ort"`` writes com.microsoft.MultiHeadAttention, ``"onnx"`` the ai.onnx
    Attention op (models that import opset 23 or later). ``provider`` (target ``"ort"``):
    ``"cpu"`` (the default) or ``"cuda"``, the execution provider that runs the model, where a
    fused form pays, or keeps the model's accuracy, on one and not the other
    (examples/cli/README.md lists what differs). ``rules``: rule names (a list or a
    comma-separated string), ``None`` or ``"all"`` for every rule. ``num_heads``: the head count
    where the model does not say it. ``explain``: report every anchor each rule tried, not only
    the near misses.

    The report is the dict ``fusekit fuse --report`` writes. Raises :class:`fusekit.Error`.
    """
    args = (target, provider, _rules(rules), _num_heads(num_heads), bool(explain))
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, report = _core.fuse_bytes(bytes(model), *args)
        return data, json.loads(report)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        data, report = _core.fuse_path(path, *args)
        return _load_proto(data, os.path.dirname(os.path.abspath(path))), json.loads(report)
    if _is_model_proto(model):
        data, report = _core.fuse_bytes(model.SerializeToString(), *args)
        return _load_proto(data, None), json.loads(report)
    raise TypeError(
        f"fuse takes an onnx.ModelProto, bytes or a path, not {type(model).__name__}")


def fuse_file(
    src: Union[str, "os.PathLike[str]"],
    dst: Union[str, "os.PathLike[str]"],
    *,
    target: str = "ort",
    provider: Optional[str] = None,
    rules: Union[None, str, Sequence[str]] = None,
    num_heads: Optional[int] = None,
    explain: bool = False,
) -> Dict[str, Any]:
    """Fuses the model file ``src`` into ``dst`` as ``fusekit fuse SRC -o DST`` does; returns the
    report.

    The model is read and written by fusekit itself, never held by Python: external data stays
    valid (in the same directory its files are kept, elsewhere the tensors are copied to
    ``DST.data``). ``dst`` is replaced atomically, and nothing is written when anything fails.
    Options as for :func:`fuse`. Raises :class:`fusekit.Error`.
    """
    return json.loads(_core.fuse_file(
        _path(src), _path(dst), target, provider, _rules(rules), _num_heads(num_heads), bool(explain)))


def inspect(
    model: Union["onnx.ModelProto", bytes, str, "os.PathLike[str]"],
    *,
    target: str = "ort",
    provider: Optional[str] = None,
    rules: Union[None, str, Sequence[str]] = None,
    num_heads: Optional[int] = None,
) -> Dict[str, Any]:
    """What ``fusekit inspect`` prints, as data.

    Returns a dict: ``ir_version``; ``opsets`` (domain, ``"ai.onnx"`` for the default one, to
    version); ``ops`` (``"domain.Op"`` or ``"Op"`` to count, over every graph); ``value_dtypes``
    (dtype name to count of values); ``attention_blocks`` (the Softmax nodes, where attention
    blocks are, fused or not); ``rules`` (every rule's name); ``report`` (what a fuse with these
    options would report; the model is not changed); ``shapes`` (every value's facts, as
    ``fusekit inspect --shapes --json`` writes them: ``{"dtype", "dims", "value"}`` by value
    name). Raises :class:`fusekit.Error`.
    """
    args = (target, provider, _rules(rules), _num_heads(num_heads))
    if isinstance(model, (bytes, bytearray, memoryview)):
        return json.loads(_core.inspect_bytes(bytes(model), *args))
    if isinstance(model, (str, os.PathLike)):
        return json.loads(_core.inspect_path(_path(model), *args))
    if _is_model_proto(model):
        return json.loads(_core.inspect_bytes(model.SerializeToString(), *args))
    raise TypeError(
        f"inspect takes an onnx.ModelProto, bytes or a path, not {type(model).__name__}")


def _path(p: Union[str, "os.PathLike[str]"]) -> str:
    path = os.fspath(p)
    return os.fsdecode(path) if isinstance(path, bytes) else path
