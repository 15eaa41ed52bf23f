"""latency.py: ONNX Runtime CPU latency of fusekit's output and the peers' against the original.

How much faster ONNX Runtime runs a model after fusekit's rewrite, beside ONNX Runtime's
transformers optimizer and onnxscript's ONNX Runtime fusions, on real exports of
production-shaped transformers.

Run by a developer by hand, never by CI, from the repository root, with the Python of a venv that
has torch, transformers (5.x), onnx, onnxruntime and onnxscript (diffusers too for the UNet; the
UNet is reported as failing to export without it), after building the fusekit CLI:

    VENV/bin/python benchmarks/latency.py --out latency.md
    VENV/bin/python benchmarks/latency.py --models bert,llama --exporters ts --size base \\
        --rounds 15 --repeat 2 --threads 1,0 --work /some/scratch/dir

What it does, for every model × exporter:

1. Exports a randomly initialised model (configs built here, seed fixed, nothing downloaded) with
   the TorchScript exporter (opset 17) or the dynamo exporter (opset 18), fp32, static shapes, in
   a child process, and checks the export against torch on random inputs.
2. Makes three variants of it: `fusekit fuse --target ort`, ONNX Runtime's transformers optimizer
   (optimize_model, opt_level=0) and onnxscript's optimize_for_ort, called as
   tests/models/peers.py calls them, each in a child process so that a crash is recorded, not
   fatal.
3. Runs every variant in ONNX Runtime on the CPU on the same inputs (for BERT, a batch whose
   second row is padded) and compares all its outputs with the original's; a variant that does
   not load, does not run or differs (max abs diff beyond 1e-3 of the output's largest magnitude)
   is reported so and not timed.
4. Times the variants that match in interleaved rounds: each round runs every variant (its inner
   runs back to back) in an order rotated by one from the previous round, so that drift in the
   machine's speed falls on all of them alike; each variant's time in a round is divided by the
   original's in the same round. --repeat makes independent sets of rounds (fresh sessions).

Sessions keep ONNX Runtime's default graph optimisation level (ORT_ENABLE_ALL, what a user
gets), so a ratio is what a rewrite adds on top of ONNX Runtime's own CPU fusions. They run with
intra_op_num_threads=1 and with ONNX Runtime's default thread count (--threads 1,0): on a shared
machine the default thread pool's latency moves by about ±10% from one run to the next, as other
processes take cores from it, which hides the few per cent a fusion is worth; one thread is the
figure to compare, the default threads the figure a user sees.

Writes a markdown table (stdout and --out): per model × exporter, the original's median latency
and each variant's latency ratio to the original (lower is faster): with --repeat 1 the median
ratio and the interquartile range of the per-round ratios, with --repeat 2 or more the range of
the per-set medians; then the fused ops each file holds (com.microsoft ops, and ai.onnx
LayerNormalization, Gelu, RMSNormalization, Attention and ONNX Runtime's
SimplifiedLayerNormalization), so that a reader sees what each optimizer did. The raw per-round
times go to --json. Exports and variants stay in --work.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import io
import json
import math
import os
import pathlib
import platform
import re
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

REPO = pathlib.Path(__file__).resolve().parents[1]
SEED = 0
MODELS = ("bert", "vit", "llama", "llama_decode", "dit", "unet", "whisper")
EXPORTERS = {"ts": ("torchscript", 17), "dynamo": ("dynamo", 18)}
PEERS = {"fusekit": "fusekit", "ort_optimizer": "ORT optimizer", "onnxscript": "onnxscript"}
# ONNX Runtime's transformers optimizer's model_type per model, as tests/models/peers.py picks it.
ORT_MODEL_TYPE = {"bert": "bert", "vit": "bert", "whisper": "bert", "llama": "gpt2",
                  "llama_decode": "gpt2", "unet": "unet", "dit": "mmdit"}
# Fused ops of the ai.onnx domain; ONNX Runtime registers its RMSNorm, SimplifiedLayerNormalization,
# there too.
FUSED_AI_ONNX = {"LayerNormalization", "Gelu", "RMSNormalization", "Attention",
                 "SimplifiedLayerNormalization"}

# Library default initialisations (std 0.02) leave attention scores near zero and the softmax
# near uniform, where a fusion with a wrong scale or mask still matches the original; std 0.1
# spreads the scores over a few units, as in a trained model.
INIT_STD = 0.1
RELATIVE_TOLERANCE = 1e-3  # of an output's largest magnitude
CHILD_TIME_LIMIT = 3600    # seconds for one export or one peer (the base sizes are slow)
WARMUP_RUNS = 3
ROUND_SECONDS = 0.2        # inner runs per round: enough for a variant to take about this long

# Model shapes by --size. small: what a 2-core CPU times in reasonable minutes; base: the named
# production model's shape.
CONFIGS = {
    "bert": {"small": dict(hidden=384, layers=6, heads=6, batch=2, seq=128),
             "base": dict(hidden=768, layers=12, heads=12, batch=2, seq=128)},       # BERT-base
    "vit": {"small": dict(hidden=384, layers=12, heads=6),                          # ViT-S/16
            "base": dict(hidden=768, layers=12, heads=12)},                         # ViT-B/16
    "llama": {"small": dict(hidden=512, layers=4, heads=8, kv_heads=4, ffn=1408, vocab=32000,
                            seq=128, past=128),
              "base": dict(hidden=960, layers=32, heads=15, kv_heads=5, ffn=2560,  # SmolLM2-360M
                           vocab=49152, seq=128, past=128)},
    "dit": {"small": dict(hidden=384, layers=6, heads=6, seq=256),
            "base": dict(hidden=1024, layers=22, heads=16, seq=256)},               # F5-TTS v1 Base
    # SD 1.5's widths without its deepest level, which would take the file past ONNX's 2 GB.
    "unet": {"small": dict(channels=(128, 256, 512), layers=1, context=512),
             "base": dict(channels=(320, 640, 1280), layers=2, context=768)},
    "whisper": {"small": dict(hidden=384, layers=4, heads=6),                       # whisper-tiny
                "base": dict(hidden=512, layers=6, heads=8)},                       # whisper-base
}


# ---------------------------------------------------------------- the models

@dataclass
class Export:
    """What torch.onnx.export takes: the module, its positional inputs, and the ONNX names."""
    module: nn.Module
    args: tuple
    input_names: list[str]
    output_names: list[str]


class Call(nn.Module):
    """Positional inputs passed on as the model's keyword arguments; one output field returned.
    The exporters name ONNX inputs by position, the libraries' models take keywords."""

    def __init__(self, model: nn.Module, names: list[str], output: str, **fixed):
        super().__init__()
        self.model, self.names, self.output, self.fixed = model, names, output, fixed

    def forward(self, *args):
        return getattr(self.model(**dict(zip(self.names, args)), **self.fixed), self.output)


def keyword_export(model: nn.Module, inputs: dict, output: str, onnx_output: str | None = None,
                   **fixed) -> Export:
    """`onnx_output` names the output in the file where the field's name is an input's too."""
    names = list(inputs)
    return Export(Call(model, names, output, **fixed), tuple(inputs.values()), names,
                  [onnx_output or output])


def bert(c: dict) -> Export:
    import transformers
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=c["hidden"], num_hidden_layers=c["layers"],
        num_attention_heads=c["heads"], intermediate_size=4 * c["hidden"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=INIT_STD)
    model = transformers.BertModel._from_config(config, attn_implementation="sdpa",
                                                add_pooling_layer=False)
    ids = torch.randint(1000, config.vocab_size, (c["batch"], c["seq"]))
    mask = torch.ones(c["batch"], c["seq"], dtype=torch.int64)
    mask[-1, c["seq"] * 3 // 4:] = 0  # a padded row: the padding mask must reach the attention
    return keyword_export(model, {"input_ids": ids, "attention_mask": mask}, "last_hidden_state")


def vit(c: dict) -> Export:
    import transformers
    config = transformers.ViTConfig(
        hidden_size=c["hidden"], num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        intermediate_size=4 * c["hidden"], image_size=224, patch_size=16,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=INIT_STD)
    model = transformers.ViTModel._from_config(config, attn_implementation="sdpa",
                                               add_pooling_layer=False)
    return keyword_export(model, {"pixel_values": torch.randn(1, 3, 224, 224)},
                          "last_hidden_state")


def whisper(c: dict) -> Export:
    import transformers
    config = transformers.WhisperConfig(
        num_mel_bins=80, d_model=c["hidden"], encoder_layers=c["layers"], decoder_layers=1,
        encoder_attention_heads=c["heads"], decoder_attention_heads=c["heads"],
        encoder_ffn_dim=4 * c["hidden"], decoder_ffn_dim=4 * c["hidden"],
        max_source_positions=1500, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        init_std=INIT_STD)
    model = transformers.WhisperModel._from_config(config, attn_implementation="sdpa")
    # 30 s of audio: 3000 mel frames, 1500 tokens after the strided convolution.
    return keyword_export(model.get_encoder(), {"input_features": torch.randn(1, 80, 3000)},
                          "last_hidden_state")


def llama_model(c: dict) -> nn.Module:
    import transformers
    config = transformers.LlamaConfig(
        vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["ffn"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"], max_position_embeddings=2048,
        tie_word_embeddings=True, initializer_range=INIT_STD)
    return transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa")


def llama(c: dict) -> Export:
    model = llama_model(c)
    ids = torch.randint(0, c["vocab"], (1, c["seq"]))
    mask = torch.ones(1, c["seq"], dtype=torch.int64)
    return keyword_export(model, {"input_ids": ids, "attention_mask": mask}, "logits",
                          use_cache=False)


class DecodeStep(nn.Module):
    """input_ids [1, 1], attention_mask [1, past + 1], past keys and values flat (key 0,
    value 0, key 1, ...) -> logits, present keys and values: the flat tensors go into a
    DynamicCache inside forward, as the exporters cannot take a Cache object as an input."""

    def __init__(self, model: nn.Module):
        super().__init__()
        from transformers.cache_utils import DynamicCache
        self.model, self.cache_class = model, DynamicCache
        # transformers 5.2x renamed past_key_values to cache.
        names = inspect.signature(model.forward).parameters
        self.cache_keyword = "cache" if "cache" in names else "past_key_values"

    def forward(self, input_ids, attention_mask, *past):
        cache = self.cache_class(tuple((past[i], past[i + 1]) for i in range(0, len(past), 2)))
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True,
                         **{self.cache_keyword: cache})
        cache = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        return (out.logits, *(t for layer in cache.layers for t in (layer.keys, layer.values)))


def llama_decode(c: dict) -> Export:
    model = llama_model(c)
    head_dim = c["hidden"] // c["heads"]
    past, past_names, present_names = [], [], []
    for layer in range(c["layers"]):
        for kind in ("key", "value"):
            past.append(torch.randn(1, c["kv_heads"], c["past"], head_dim))
            past_names.append(f"past_key_values.{layer}.{kind}")
            present_names.append(f"present.{layer}.{kind}")
    ids = torch.randint(0, c["vocab"], (1, 1))
    mask = torch.ones(1, c["past"] + 1, dtype=torch.int64)
    return Export(DecodeStep(model), (ids, mask, *past),
                  ["input_ids", "attention_mask", *past_names], ["logits", *present_names])


def rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    """x_transformers' rotate_half, which F5-TTS's rotary embedding uses: interleaved pairs
    (x0, x1) -> (-x1, x0)."""
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


class DiTBlock(nn.Module):
    """F5-TTS's DiTBlock: adaLN-zero modulated LayerNorm (no affine), self-attention with rotary
    embedding on every head, gated residual, modulated LayerNorm, GELU-tanh MLP (2x wide)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.modulation = nn.Linear(hidden, 6 * hidden)
        self.attn_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.to_q, self.to_k, self.to_v, self.to_out = (nn.Linear(hidden, hidden)
                                                        for _ in range(4))
        self.ff_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.ff = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(approximate="tanh"),
                                nn.Linear(2 * hidden, hidden))

    def heads_of(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.heads, -1)).transpose(1, 2)

    def forward(self, x, t, cos, sin):
        shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = \
            self.modulation(nn.functional.silu(t)).unsqueeze(1).chunk(6, dim=-1)
        norm = self.attn_norm(x) * (1 + scale_msa) + shift_msa
        q, k, v = (self.heads_of(p(norm)) for p in (self.to_q, self.to_k, self.to_v))
        q, k = (h * cos + rotate_pairs(h) * sin for h in (q, k))
        attn = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + gate_msa * self.to_out(attn.transpose(1, 2).flatten(2))
        norm = self.ff_norm(x) * (1 + scale_mlp) + shift_mlp
        return x + gate_mlp * self.ff(norm)


class DiT(nn.Module):
    """F5-TTS's DiT trunk: sinusoidal time embedding and MLP, the blocks, adaLN final norm and
    the projection to 100 mel channels. The input is the already embedded sequence: F5-TTS's
    convolutional text and audio embedding in front holds no block a fusion targets.

    Written here rather than imported: the project installs the f5-tts package without its
    dependencies (torchaudio, librosa, a training stack) and then imports it only with
    placeholders for them (tests/models/export/diffusion.py), too much machinery for a
    benchmark."""

    def __init__(self, hidden: int, layers: int, heads: int, seq: int):
        super().__init__()
        self.time_mlp = nn.Sequential(nn.Linear(256, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.blocks = nn.ModuleList(DiTBlock(hidden, heads) for _ in range(layers))
        self.final_modulation = nn.Linear(hidden, 2 * hidden)
        self.final_norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)
        self.proj_out = nn.Linear(hidden, 100)
        half = hidden // heads // 2
        angles = torch.arange(seq)[:, None] * 10000.0 ** (-torch.arange(half) / half)
        angles = angles.repeat_interleave(2, dim=-1)  # pairs share an angle, as rotate_pairs
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, time):
        freqs = 1000.0 * time[:, None] * torch.exp(-math.log(10000.0) *
                                                   torch.arange(128) / 128)
        t = self.time_mlp(torch.cat((freqs.sin(), freqs.cos()), dim=-1))
        for block in self.blocks:
            x = block(x, t, self.cos, self.sin)
        scale, shift = self.final_modulation(nn.functional.silu(t)).unsqueeze(1).chunk(2, -1)
        return self.proj_out(self.final_norm(x) * (1 + scale) + shift)


def dit(c: dict) -> Export:
    model = DiT(c["hidden"], c["layers"], c["heads"], c["seq"])
    with torch.no_grad():  # F5-TTS zero-initialises the modulations: a trained model's are not
        for p in model.parameters():
            p.normal_(0.0, INIT_STD)
    # Batch 2: classifier-free guidance runs the conditional and unconditional passes together.
    return Export(model, (torch.randn(2, c["seq"], c["hidden"]), torch.rand(2)),
                  ["x", "time"], ["mel"])


def unet(c: dict) -> Export:
    try:
        import diffusers
    except ImportError as e:
        raise RuntimeError("diffusers is not installed (pip install diffusers)") from e
    model = diffusers.UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=c["channels"],
        layers_per_block=c["layers"], cross_attention_dim=c["context"], attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"))
    # A 32x32 latent (1024 tokens at the top level), batch 2 for classifier-free guidance, 77
    # text tokens.
    inputs = {"sample": torch.randn(2, 4, 32, 32),
              "timestep": torch.tensor([500, 500], dtype=torch.int64),
              "encoder_hidden_states": torch.randn(2, 77, c["context"])}
    return keyword_export(model, inputs, "sample", onnx_output="noise_pred")


BUILDERS = {"bert": bert, "vit": vit, "llama": llama, "llama_decode": llama_decode, "dit": dit,
            "unet": unet, "whisper": whisper}


# ---------------------------------------------------------------- export (child process)

def flat(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for item in x for t in flat(item)]


def export_one(model: str, exporter: str, size: str, path: pathlib.Path) -> None:
    """Exports one model to `path`, its inputs to inputs_path(path), and checks the export
    against torch."""
    torch.manual_seed(SEED)
    spec = BUILDERS[model](CONFIGS[model.removesuffix("_decode")][size])
    spec.module.eval()
    kind, opset = EXPORTERS[exporter]
    with torch.no_grad():
        expected = [t.numpy() for t in flat(spec.module(*spec.args))]
    # The exporters' warnings and progress lines would bury the benchmark's own.
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if kind == "torchscript":
            torch.onnx.export(spec.module, spec.args, str(path), dynamo=False,
                              opset_version=opset, input_names=spec.input_names,
                              output_names=spec.output_names, do_constant_folding=True)
        else:
            program = torch.onnx.export(spec.module, spec.args, dynamo=True, opset_version=opset,
                                        input_names=spec.input_names,
                                        output_names=spec.output_names, optimize=True)
            program.save(str(path))
    feeds = {name: t.numpy() for name, t in zip(spec.input_names, flat(spec.args))}
    np.savez(inputs_path(path), **feeds)
    got = run(session(path, threads=0), feeds)
    wrong = mismatch(dict(zip(spec.output_names, expected)), got)
    if wrong:
        path.unlink()  # not to be taken up by --reuse-exports
        raise RuntimeError(f"the export differs from torch: {wrong}")


def inputs_path(model_path: pathlib.Path) -> pathlib.Path:
    return model_path.with_suffix(".inputs.npz")


# ---------------------------------------------------------------- peers (child process)

def run_peer(peer: str, source: str, target: str, model_type: str) -> None:
    if peer == "ort_optimizer":
        from onnxruntime.transformers.optimizer import optimize_model
        optimize_model(source, model_type=model_type, num_heads=0, hidden_size=0,
                       opt_level=0).save_model_to_file(target)
    elif peer == "onnxscript":
        import onnx_ir as ir
        from onnxscript.rewriter.ort_fusions import optimize_for_ort
        optimized, _ = optimize_for_ort(ir.load(source))
        ir.save(optimized, target)
    else:
        raise ValueError(peer)


def last_error(stderr: str) -> str:
    """The exception a traceback ends with, or its last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines)
              if re.match(r"[\w.]+(Error|Exception|Fail)\b.*:", line)]
    return " ".join(lines[starts[-1] if starts else -1:])[:300] if lines else ""


@dataclass
class Outcome:
    """How a child process that was to write a file ended."""
    status: str  # ok, fails (an error exit), crashes (killed by a signal) or times out
    seconds: float
    detail: str = ""


def child(command: list[str], target: pathlib.Path) -> Outcome:
    target.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return Outcome("times out", CHILD_TIME_LIMIT, f"no result in {CHILD_TIME_LIMIT} s")
    seconds = time.perf_counter() - start
    if done.returncode != 0 or not target.exists():
        return Outcome("crashes" if done.returncode < 0 else "fails", seconds,
                       last_error(done.stderr) or f"exit {done.returncode}")
    return Outcome("ok", seconds)


def make_variant(peer: str, source: pathlib.Path, target: pathlib.Path, model: str,
                 fusekit: pathlib.Path) -> Outcome:
    if peer == "fusekit":
        return child([str(fusekit), "fuse", str(source), "-o", str(target), "--target", "ort",
                      "--quiet"], target)
    return child([sys.executable, __file__, "--peer", peer, str(source), str(target),
                  ORT_MODEL_TYPE[model]], target)


# ---------------------------------------------------------------- ONNX Runtime

NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
               "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def session(path: pathlib.Path, threads: int) -> ort.InferenceSession:
    """A CPU session as a user makes one (default graph optimisations); threads 0 is ONNX
    Runtime's default."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def feed_for(sess: ort.InferenceSession, inputs: dict[str, np.ndarray]) -> dict:
    """The original's inputs by name, cast where a rewrite changed an input's type (ONNX
    Runtime's optimizer may take the mask as int32)."""
    return {i.name: inputs[i.name].astype(NUMPY_TYPES.get(i.type, inputs[i.name].dtype))
            for i in sess.get_inputs()}


def run(sess: ort.InferenceSession, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feed_for(sess, inputs))))


def mismatch(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> str | None:
    """Why `got` is not `expected`, or None. Outputs are paired by name, or by position where a
    rewrite renamed them."""
    if set(got) != set(expected):
        if len(got) != len(expected):
            return f"{len(got)} outputs, the original has {len(expected)}"
        got = dict(zip(expected, got.values()))
    for name, want in expected.items():
        have = got[name]
        if have.shape != want.shape:
            return f"output {name} has shape {list(have.shape)}, expected {list(want.shape)}"
        scale = float(np.abs(want).max())
        diff = float(np.abs(have.astype(np.float64) - want).max())
        if not diff <= RELATIVE_TOLERANCE * scale:  # a NaN is wrong too
            return f"max diff {diff:.3g} on {name}, whose largest magnitude is {scale:.3g}"
    return None
    return None


def fused_ops(path: pathlib.Path) -> dict[str, int]:
    """Fused ops by name: com.microsoft's plain, ai.onnx's as onnx.NAME (both have an
    Attention)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    counts = collections.Counter(
        n.op_type if n.domain == "com.microsoft" else f"onnx.{n.op_type}" for n in graph.node
        if n.domain == "com.microsoft" or (n.domain in ("", "ai.onnx") and
                                           n.op_type in FUSED_AI_ONNX))
    return dict(sorted(counts.items()))


def check(variants: dict[str, dict], inputs: dict[str, np.ndarray]) -> None:
    """Loads and runs every variant that was made, compares it with the original and sets its
    status: ok, fails to load, fails to run or wrong."""
    expected = None
    for name, v in variants.items():  # the original first
        if name != "original" and expected is None:
            return  # the original did not run: nothing to compare with
        if v["status"] != "ok":
            continue
        v["fused_ops"] = fused_ops(v["path"])
        try:
            sess = session(v["path"], threads=0)
        except Exception as e:
            v.update(status="fails to load", detail=one_line(e))
            continue
        try:
            got = run(sess, inputs)
        except Exception as e:
            v.update(status="fails to run", detail=one_line(e))
            continue
        if name == "original":
            expected = got
        elif wrong := mismatch(expected, got):
            v.update(status="wrong", detail=wrong)


def one_line(e: Exception) -> str:
    lines = str(e).strip().splitlines() or [type(e).__name__]
    return lines[0][:300]


# ---------------------------------------------------------------- timing

def measure(paths: dict[str, pathlib.Path], inputs: dict[str, np.ndarray], threads: int,
            rounds: int) -> dict:
    """One set of interleaved rounds on fresh sessions: per variant, the seconds of one run in
    each round."""
    sessions = {name: session(p, threads) for name, p in paths.items()}
    feeds = {name: feed_for(s, inputs) for name, s in sessions.items()}
    warmup = {}
    for name, s in sessions.items():
        for _ in range(WARMUP_RUNS):
            start = time.perf_counter()
            s.run(None, feeds[name])
            warmup[name] = time.perf_counter() - start
    inner = max(1, round(ROUND_SECONDS / warmup["original"]))
    names = list(sessions)
    seconds = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            for _ in range(inner):
                sessions[name].run(None, feeds[name])
            seconds[name].append((time.perf_counter() - start) / inner)
    return {"inner_runs": inner, "seconds": seconds}


def summary(ratios: list[float]) -> dict:
    q1, median, q3 = np.percentile(ratios, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3),
            "min": min(ratios), "max": max(ratios)}


def ratios_of(run_set: dict) -> dict[str, dict]:
    base = run_set["seconds"]["original"]
    return {name: summary([s / b for s, b in zip(times, base)])
            for name, times in run_set["seconds"].items() if name != "original"}


# ---------------------------------------------------------------- one model × exporter

def bench(model: str, exporter: str, args) -> dict:
    stem = f"{model}.{args.size}.{exporter}"
    original = args.work / f"{stem}.onnx"
    entry = {"model": model, "exporter": exporter}
    if not (args.reuse_exports and original.exists() and inputs_path(original).exists()):
        log(f"{stem}: exporting")
        done = child([sys.executable, __file__, "--export-one", model, exporter, args.size,
                      str(original)], original)
        entry["export_seconds"] = round(done.seconds, 1)
        if done.status != "ok":
            entry["error"] = f"export {done.status}: {done.detail}"
            return entry
    with np.load(inputs_path(original)) as saved:
        inputs = dict(saved)
    variants = {"original": {"path": original, "status": "ok"}}
    for peer in PEERS:
        log(f"{stem}: {peer}")
        target = args.work / f"{stem}.{peer}.onnx"
        done = make_variant(peer, original, target, model, args.fusekit)
        variants[peer] = {"path": target, "status": done.status, "seconds": round(done.seconds, 1)}
        if done.detail:
            variants[peer]["detail"] = done.detail
    log(f"{stem}: checking outputs")
    check(variants, inputs)
    entry["variants"] = variants
    if variants["original"]["status"] != "ok":
        return entry
    timed = {name: v["path"] for name, v in variants.items() if v["status"] == "ok"}
    entry["timings"] = {}
    for threads in args.threads:
        sets = []
        for repeat in range(args.repeat):
            log(f"{stem}: timing, {threads or 'default'} threads, set {repeat + 1}")
            run_set = measure(timed, inputs, threads, args.rounds)
            run_set["ratios"] = ratios_of(run_set)
            sets.append(run_set)
        entry["timings"][str(threads)] = sets
    return entry


# ---------------------------------------------------------------- report

def ratio_cell(sets: list[dict], name: str) -> str:
    medians = [s["ratios"][name]["median"] for s in sets]
    if len(sets) == 1:
        r = sets[0]["ratios"][name]
        return f"{r['median']:.2f} ({r['q1']:.2f}–{r['q3']:.2f})"
    return f"{min(medians):.2f}–{max(medians):.2f}"


def original_ms(sets: list[dict]) -> str:
    times = [t for s in sets for t in s["seconds"]["original"]]
    return f"{1000 * float(np.median(times)):.1f}"


def markdown(results: dict, threads: list[int], repeat: int) -> str:
    lines, notes = [], []

    def note(text: str) -> str:  # one note per failure, however many tables cite it
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    legend = ("median ratio to the original (interquartile range of the per-round ratios)"
              if repeat == 1 else f"range of the medians of {repeat} independent sets of rounds")
    for t in threads:
        lines += [f"### intra_op_num_threads={t or 'default'}", "",
                  f"Latency ratio to the original, lower is faster: {legend}.", "",
                  "| model | exporter | original ms | " + " | ".join(PEERS.values()) + " |",
                  "|---|---|---|" + "---|" * len(PEERS)]
        for e in results["models"]:
            row = [e["model"], e["exporter"]]
            if "error" in e:
                row += [e["error"].split(":")[0] + " " + note(f"{e['model']} {e['exporter']}: "
                                                              f"{e['error']}")]
                row += [""] * len(PEERS)
            elif e["variants"]["original"]["status"] != "ok":
                v = e["variants"]["original"]
                row += [f"original {v['status']} " + note(v["detail"])] + [""] * len(PEERS)
            else:
                sets = e["timings"][str(t)]
                row.append(original_ms(sets))
                for peer in PEERS:
                    v = e["variants"][peer]
                    row.append(ratio_cell(sets, peer) if v["status"] == "ok" else
                               f"{v['status']} " + note(f"{e['model']} {e['exporter']} {peer}: "
                                                        f"{v['detail']}"))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["### Fused ops in each file", "",
              "com.microsoft ops, and as onnx.NAME the ai.onnx ops " +
              ", ".join(sorted(FUSED_AI_ONNX)) + ".", "",
              "| model | exporter | original | " + " | ".join(PEERS.values()) + " |",
              "|---|---|---|" + "---|" * len(PEERS)]
    for e in results["models"]:
        if "variants" not in e:
            continue
        cells = []
        for name in ("original", *PEERS):
            ops = e["variants"][name].get("fused_ops")
            cells.append("—" if ops is None else
                         ", ".join(f"{op} {n}" for op, n in ops.items()) or "none")
        lines.append(f"| {e['model']} | {e['exporter']} | " + " | ".join(cells) + " |")
    if notes:
        lines += ["", *(f"[{i}] {text}" for i, text in enumerate(notes, 1))]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main

def log(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, file=sys.stderr, flush=True)


def versions() -> dict:
    import importlib.metadata
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count()}
    for package in ("torch", "transformers", "diffusers", "onnx", "onnxruntime", "onnxscript"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[package] = importlib.metadata.version(package)
    done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                          capture_output=True, text=True)
    out["fusekit_revision"] = done.stdout.strip()
    return out


def comma_list(choices):
    def parse(text: str) -> list[str]:
        items = [s for s in text.split(",") if s]
        unknown = [s for s in items if s not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from "
                                             f"{', '.join(choices)}")
        return items
    return parse


def jsonable(x):
    if isinstance(x, pathlib.Path):
        return x.name
    raise TypeError(type(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=comma_list(MODELS), default=list(MODELS),
                        help=f"comma list of {','.join(MODELS)} (default all)")
    parser.add_argument("--exporters", type=comma_list(EXPORTERS), default=list(EXPORTERS),
                        help="comma list of ts (TorchScript, opset 17), dynamo (opset 18)")
    parser.add_argument("--size", choices=("small", "base"), default="small",
                        help="small (default): scaled down for a small CPU; base: the named "
                             "production models' shapes")
    parser.add_argument("--work", type=pathlib.Path, default=REPO / "build" / "latency",
                        help="where exports and variants are kept (default build/latency)")
    parser.add_argument("--fusekit", type=pathlib.Path,
                        default=REPO / "build" / "dev" / "examples" / "fusekit",
                        help="the fusekit CLI (default build/dev/examples/fusekit)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per set (default 15)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="independent sets of rounds (default 2)")
    parser.add_argument("--threads", type=lambda s: [int(t) for t in s.split(",")],
                        default=[1, 0], help="intra-op thread counts, 0 = ONNX Runtime's "
                                             "default (default 1,0)")
    parser.add_argument("--out", type=pathlib.Path, help="write the markdown here too")
    parser.add_argument("--json", type=pathlib.Path,
                        help="the raw numbers (default WORK/latency.json)")
    parser.add_argument("--reuse-exports", action="store_true",
                        help="keep exports already in --work instead of exporting again")
    parser.add_argument("--export-one", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--peer", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export_one:
        model, exporter, size, path = args.export_one
        export_one(model, exporter, size, pathlib.Path(path))
        return 0
    if args.peer:
        run_peer(*args.peer)
        return 0
    if not args.fusekit.exists():
        parser.error(f"no fusekit CLI at {args.fusekit} (build it, or pass --fusekit)")
    if args.rounds < 1 or args.repeat < 1:
        parser.error("--rounds and --repeat must be at least 1")
    args.fusekit = args.fusekit.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    args.json = args.json or args.work / "latency.json"
    results = {"versions": versions(), "size": args.size, "rounds": args.rounds,
               "repeat": args.repeat, "threads": args.threads, "models": []}
    for model in args.models:
        for exporter in args.exporters:
            results["models"].append(bench(model, exporter, args))
            # Written after every model, so that an interrupted run keeps what it measured.
            args.json.write_text(json.dumps(results, indent=1, default=jsonable) + "\n")
    table = markdown(results, args.threads, args.repeat)
    print(table)
    if args.out:
        args.out.write_text(table)
    log(f"raw numbers in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
