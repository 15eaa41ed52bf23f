"""Diffusion-transformer fixtures: F5-TTS's DiT, SD3 / SD3.5 (MMDiT, joint attention) and Flux
(double- and single-stream blocks) from their libraries' own classes with tiny random configs, and
the F5-TTS attention as hand-written F5-TTS ONNX exporters write it (the "seed form").

Families 1-3 are exported by the TorchScript exporter (opset 17) and the dynamo exporter (opsets 18
and 23), each in float32 and float16 (the module halved, float inputs float16). Static shapes
throughout: F5-TTS's DiT takes its sequence length as a Python int, and one shape for every file
keeps the fixtures comparable.
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import pathlib
import sys
import types

import torch
from torch import nn

import common

EXPORTERS = {"ts17": ("torchscript", 17), "dynamo18": ("dynamo", 18), "dynamo23": ("dynamo", 23)}
DTYPES = {"fp32": ("float32", torch.float32), "fp16": ("float16", torch.float16)}
BATCH = 2
STATIC = "static shapes"


# Random weights leave the attention near uniform (logits of standard deviation 0.3-1): a wrong
# scale or layout then hides in the rounding. Each attention's q and k are scaled (its
# q/k norm weights where it has them, else its q and k projections), so that the logits spread
# over a few units, peaked like a trained model's: standard deviation about 3-4 (3x on the
# projections, 2x on the norm weights).


def _sharpen(model: nn.Module, factor: float) -> None:
    norms = ("norm_q", "norm_k", "norm_added_q", "norm_added_k", "q_norm", "k_norm")
    projections = ("to_q", "to_k", "add_q_proj", "add_k_proj", "to_q_c", "to_k_c")
    with torch.no_grad():
        for module in model.modules():
            normed = [getattr(module, n) for n in norms
                      if getattr(getattr(module, n, None), "weight", None) is not None]
            for part in normed or [getattr(module, n) for n in projections
                                   if isinstance(getattr(module, n, None), nn.Linear)]:
                part.weight.mul_(factor)
                if not normed and part.bias is not None:
                    part.bias.mul_(factor)


# ---------------------------------------------------------------- F5-TTS DiT

def _f5_dit_class():
    return _f5_backbone("dit", "DiT")


def _f5_backbone(module_name: str, class_name: str):
    """A backbone class of f5_tts.model.backbones (dit.DiT, mmdit.MMDiT, unett.UNetT) without what
    only training and mel extraction need.

    f5_tts/model/__init__.py imports the trainer (wandb, accelerate, datasets, ...): the
    subpackage is registered without running it. modules.py imports torchaudio and librosa (mel
    spectrograms) and utils.py rjieba and pypinyin (text to pinyin): where they are not installed,
    they are placeholders for the import only, raising on any use: the DiT's forward uses none
    of them, and the export check against torch would fail if it did."""
    if "f5_tts.model" not in sys.modules:
        root = importlib.util.find_spec("f5_tts")
        if root is None:
            raise ModuleNotFoundError("f5_tts (pip install --no-deps f5-tts)")
        package = types.ModuleType("f5_tts.model")
        package.__path__ = [str(pathlib.Path(list(root.submodule_search_locations)[0]) / "model")]
        sys.modules["f5_tts.model"] = package

    def unused(name):
        def fail(*args, **kwargs):
            raise RuntimeError(f"{name} is a placeholder: not installed for the fixture export")
        return fail

    placeholders = {}
    for name, children in (("torchaudio", ()), ("librosa", ("filters",)), ("rjieba", ()),
                           ("pypinyin", ())):
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            continue
        for full in (name, *(f"{name}.{c}" for c in children)):
            module = types.ModuleType(full)
            module.__getattr__ = functools.partial(lambda full, attr: unused(f"{full}.{attr}"),
                                                   full)
            placeholders[full] = module
    sys.modules.update(placeholders)
    try:
        backbone = importlib.import_module(f"f5_tts.model.backbones.{module_name}")
    finally:
        for full in placeholders:  # they must not make other libraries believe them installed
            sys.modules.pop(full, None)
    return getattr(backbone, class_name)


F5_SEQ = 16        # mel frames
F5_TEXT = 12       # text tokens (padded to F5_SEQ inside the DiT)
F5_MEL = 8
F5_VOCAB = 32
F5_DEPTH = 2


class _IntSeqLen(nn.Module):
    """F5-TTS's TextEmbedding takes a tensor seq_len for a batch of per-sample lengths (masks);
    the TorchScript tracer hands it x.shape[1] as a tensor. The length is the static mel length,
    so it is passed on as the Python int it is in eager mode."""

    def __init__(self, text_embed):
        super().__init__()
        self.text_embed = text_embed

    def forward(self, text, seq_len, drop_text=False):
        return self.text_embed(text, seq_len=int(seq_len), drop_text=drop_text)


class _F5(nn.Module):
    """DiT.forward(x, cond, text, time) with mask None, no CFG drop, no cache."""

    def __init__(self, dit):
        super().__init__()
        self.dit = dit

    def forward(self, x, cond, text, time):
        return self.dit(x, cond, text, time, mask=None, drop_audio_cond=False, drop_text=False,
                        cache=False)


def _f5(dtype: torch.dtype, exporter: str):
    DiT = _f5_dit_class()
    dit = DiT(dim=32, depth=F5_DEPTH, heads=2, dim_head=16, dropout=0.0, ff_mult=2,
              mel_dim=F5_MEL, text_num_embeds=F5_VOCAB, text_dim=16, conv_layers=1)
    common.redraw_zero_parameters(dit)
    _sharpen(dit, 3.0)
    # The text embedding precomputes sinusoids for 8192 positions and slices the first seq_len:
    # keep only the positions a fixture uses, or the exporters write the whole table.
    dit.text_embed.freqs_cis = dit.text_embed.freqs_cis[:F5_SEQ].clone()
    dit.text_embed = _IntSeqLen(dit.text_embed)
    module = _F5(dit).to(dtype)
    args = (torch.randn(BATCH, F5_SEQ, F5_MEL, dtype=dtype),
            torch.randn(BATCH, F5_SEQ, F5_MEL, dtype=dtype),
            torch.randint(0, F5_VOCAB, (BATCH, F5_TEXT)),
            torch.rand(BATCH, dtype=dtype))
    fills = {"text": {"int": [0, F5_VOCAB]}, "time": {"normal": 0.5}}
    return dict(module=module, args=args, input_names=["x", "cond", "text", "time"],
                output_names=["pred"], fills=fills, blocks=F5_DEPTH,
                note=f"F5-TTS DiT dim 32, 2 heads of 16, {F5_DEPTH} layers, 1 ConvNeXt text "
                     f"layer; {F5_SEQ} mel frames, {F5_TEXT} text tokens, batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- SD3 / SD3.5

SD3_LAYERS = 2
SD3_TEXT = 6


class _SD3(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep):
        return self.model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                          pooled_projections=pooled_projections, timestep=timestep,
                          return_dict=False)[0]


def _sd3(dtype: torch.dtype, exporter: str, qk_norm: str | None = None,
         dual_attention_layers: tuple[int, ...] = ()):
    import diffusers
    # Passed only when set: SD3 configs from before SD3.5 Medium have no such key.
    dual = {"dual_attention_layers": dual_attention_layers} if dual_attention_layers else {}
    model = diffusers.SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_layers=SD3_LAYERS, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=32,
        pooled_projection_dim=16, out_channels=4, pos_embed_max_size=4, qk_norm=qk_norm, **dual)
    common.redraw_zero_parameters(model)
    _sharpen(model, 2.0 if qk_norm else 3.0)
    module = _SD3(model).to(dtype)
    args = (torch.randn(BATCH, 4, 8, 8, dtype=dtype),
            torch.randn(BATCH, SD3_TEXT, 16, dtype=dtype),
            torch.randn(BATCH, 16, dtype=dtype),
            (torch.rand(BATCH) * 1000).to(dtype))
    fills = {"timestep": {"normal": 500.0}}
    style = "SD3.5 (qk_norm rms_norm)" if qk_norm else "SD3"
    if dual_attention_layers:
        style += (f" with dual attention in layers {list(dual_attention_layers)} (a second "
                  f"self-attention on the image tokens, SD3.5 Medium's MMDiT-X)")
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "pooled_projections",
                             "timestep"],
                output_names=["sample"], fills=fills,
                blocks=SD3_LAYERS + len(dual_attention_layers),
                note=f"{style} MMDiT, 2 heads of 16, {SD3_LAYERS} joint blocks (the last "
                     f"context_pre_only, still one joint attention); 8x8 latent, patch 2 "
                     f"(16 image tokens) + {SD3_TEXT} text tokens, batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- Flux

FLUX_DOUBLE = 1
FLUX_SINGLE = 1
FLUX_GRID = 4      # 4x4 packed latent tokens
FLUX_TEXT = 8


class _Flux(nn.Module):
    """The image and text position ids are fixed for the 4x4 latent (buffers, not inputs): Flux's
    RoPE table is computed from them in float64 on the CPU (FluxPosEmbed), and ONNX Runtime's CPU
    provider has no float64 Cos/Sin. From constant ids the dynamo exporter folds the table into
    constants, and the TorchScript exporter writes it in float32 (Einsum → Cos/Sin)."""

    def __init__(self, model, img_ids, txt_ids):
        super().__init__()
        self.model = model
        self.register_buffer("img_ids", img_ids)
        self.register_buffer("txt_ids", txt_ids)

    def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep):
        return self.model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                          pooled_projections=pooled_projections, timestep=timestep,
                          img_ids=self.img_ids, txt_ids=self.txt_ids, guidance=None,
                          return_dict=False)[0]


def _diffusers_rms_norms(model: nn.Module) -> None:
    """torch.nn.RMSNorm (Flux's q/k norms) as diffusers' own RMSNorm (SD3.5's q/k norms), the same
    weights and eps: the TorchScript exporter has no aten::rms_norm symbolic at opset 17."""
    from diffusers.models.normalization import RMSNorm
    for parent in list(model.modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.RMSNorm):
                eps = child.eps if child.eps is not None else torch.finfo(torch.float32).eps
                norm = RMSNorm(child.normalized_shape, eps=eps,
                               elementwise_affine=child.weight is not None)
                if child.weight is not None:
                    norm.weight.data.copy_(child.weight.data)
                setattr(parent, child_name, norm)


def _flux(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=FLUX_DOUBLE, num_single_layers=FLUX_SINGLE,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=16,
        pooled_projection_dim=16, guidance_embeds=False, axes_dims_rope=(4, 6, 6))
    common.redraw_zero_parameters(model)
    _sharpen(model, 2.0)
    swapped = ""
    if exporter == "torchscript":
        _diffusers_rms_norms(model)
        swapped = ("; q/k norms torch.nn.RMSNorm → diffusers RMSNorm (no aten::rms_norm "
                   "symbolic at opset 17)")
    rows, cols = torch.meshgrid(torch.arange(FLUX_GRID), torch.arange(FLUX_GRID), indexing="ij")
    img_ids = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float()
    txt_ids = torch.zeros(FLUX_TEXT, 3)
    module = _Flux(model, img_ids, txt_ids).to(dtype)
    module.img_ids, module.txt_ids = img_ids, txt_ids  # ids stay float32, as the pipeline's
    args = (torch.randn(BATCH, FLUX_GRID * FLUX_GRID, 16, dtype=dtype),
            torch.randn(BATCH, FLUX_TEXT, 16, dtype=dtype),
            torch.randn(BATCH, 16, dtype=dtype),
            torch.rand(BATCH, dtype=dtype))
    fills = {"timestep": {"normal": 0.5}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "pooled_projections",
                             "timestep"],
                output_names=["sample"], fills=fills, blocks=FLUX_DOUBLE + FLUX_SINGLE,
                note=f"Flux, 2 heads of 16, {FLUX_DOUBLE} double-stream + {FLUX_SINGLE} "
                     f"single-stream block, RoPE axes (4, 6, 6), no guidance; "
                     f"{FLUX_GRID * FLUX_GRID} image + {FLUX_TEXT} text tokens, batch {BATCH}; "
                     f"position ids fixed (buffers, not inputs): float64 RoPE table otherwise"
                     f"{swapped}; {STATIC}")


# ---------------------------------------------------------------- the seed F5-TTS form

SEED_LAYERS = 2
SEED_HEADS = 4
SEED_HEAD_DIM = 16
SEED_SEQ = 16


class _SeedF5(nn.Module):
    """The attention of hand-written F5-TTS ONNX exporters: RoPE on q and k, kᵀ taken before
    the score MatMul, the scores cast to float32 and scaled by 100 around Softmax, cast back."""

    def __init__(self, casts: bool):
        super().__init__()
        hidden = SEED_HEADS * SEED_HEAD_DIM
        self.casts = casts
        self.layers = nn.ModuleList(
            nn.ModuleDict({n: nn.Linear(hidden, hidden, bias=n != "out") for n in "qkv"} |
                          {"out": nn.Linear(hidden, hidden, bias=False)})
            for _ in range(SEED_LAYERS))
        half = SEED_HEAD_DIM // 2
        freqs = 1.0 / 10000 ** (torch.arange(half).float() / half)
        angles = torch.outer(torch.arange(SEED_SEQ).float(), freqs)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rope(self, t):
        lo, hi = t[..., :SEED_HEAD_DIM // 2], t[..., SEED_HEAD_DIM // 2:]
        return t * self.cos + torch.cat([-hi, lo], dim=-1) * self.sin

    def forward(self, x):
        b, s, d = x.shape
        for layer in self.layers:
            def heads(t):
                return t.view(b, s, SEED_HEADS, SEED_HEAD_DIM).transpose(1, 2)
            q = self.rope(heads(layer["q"](x)))
            k = self.rope(heads(layer["k"](x)))
            v = heads(layer["v"](x))
            kt = k.transpose(-1, -2)
            scores = torch.matmul(q, kt)
            if self.casts:
                scores = scores.float()
            p = torch.softmax(scores * 100.0, dim=-1)
            if self.casts:
                p = p.half()
            o = torch.matmul(p, v).transpose(1, 2).reshape(b, s, d)
            x = x + layer["out"](o)
        return x


def _seed(dtype: torch.dtype, exporter: str):
    casts = dtype == torch.float16
    module = _SeedF5(casts)
    with torch.no_grad():  # the weights of fusekit's sample DiT: U(-1/2, 1/2)/sqrt(rows)
        for name, p in module.named_parameters():
            if name.endswith("weight"):
                p.uniform_(-0.5, 0.5).div_(math.sqrt(p.shape[1]))
            else:
                p.fill_(0.01)
    module = module.to(dtype)
    args = (torch.randn(BATCH, SEED_SEQ, SEED_HEADS * SEED_HEAD_DIM, dtype=dtype) * 0.3,)
    how = "float32 casts around Mul(100) → Softmax" if casts else "no casts"
    return dict(module=module, args=args, input_names=["x"], output_names=["y"],
                fills={"x": {"normal": 0.3}}, blocks=SEED_LAYERS,
                note=f"hand-written F5-TTS export form: {SEED_LAYERS} layers, {SEED_HEADS} heads "
                     f"of {SEED_HEAD_DIM}, batch {BATCH}, {SEED_SEQ} positions, RoPE on q and k, "
                     f"kᵀ = k.transpose(-1, -2) before the score MatMul, scale 100, {how}; "
                     f"{STATIC}")


# ---------------------------------------------------------------- the fixture table

def _fixture(build, family: str, exporter: str, opset: int, dtype: str, torch_dtype, name: str):
    spec = build(torch_dtype, exporter)
    return common.export(spec["module"], spec["args"], name, family=family, exporter=exporter,
                         opset=opset, dtype=dtype, blocks=spec["blocks"],
                         input_names=spec["input_names"], output_names=spec["output_names"],
                         fills=spec["fills"], note=spec["note"])


def family_fixtures(families: dict) -> dict:
    """The fixtures of a table STEM -> (family, builder): each stem exported fp32 by both
    exporters, as _fixture makes them."""
    def export(name: str, *, stem: str, exporter: str, opset: int) -> dict:
        family, build = families[stem]
        return _fixture(build, family, exporter, opset, "float32", torch.float32, name)
    return common.fp32_matrix(families, export, "stem")


FAMILIES = {
    "f5tts_dit": ("f5tts", _f5),
    "sd3": ("sd3", functools.partial(_sd3, qk_norm=None)),
    "sd35_qknorm": ("sd3", functools.partial(_sd3, qk_norm="rms_norm")),
    "flux": ("flux", _flux),
}

# Left out: the TorchScript exporter writes diffusers' AdaLayerNormContinuous
# `self.silu(emb).to(x.dtype)` as a float16 → float16 Cast, and ONNX Runtime 1.23.2's CPU provider
# refuses the session with graph optimizations disabled (the export check's setting): "Type Error:
# Type (tensor(float)) of output arg (InsertedPrecisionFreeCast_/model/.../Cast_output_0) of node
# (/model/.../Cast) does not match expected type (tensor(float16))". With ORT_ENABLE_BASIC the Cast
# is eliminated first and the session loads.
# Exports ONNX Runtime refuses to load as written: left out, listed in the manifest with why.
_CAST_REFUSED = (
    "the TorchScript export writes a float16→float16 Cast (AdaLayerNormContinuous's "
    ".to(x.dtype)) that ONNX Runtime 1.23.2 refuses to load with optimizations off: Type "
    "(tensor(float)) of output arg (InsertedPrecisionFreeCast_…) does not match expected type "
    "(tensor(float16))")
UNLOADABLE = {name: _CAST_REFUSED for name in ("sd3.ts17.fp16", "sd35_qknorm.ts17.fp16",
                                                "flux.ts17.fp16")}

FIXTURES = {}
for _stem, (_family, _build) in FAMILIES.items():
    for _tag, (_exporter, _opset) in EXPORTERS.items():
        for _dt, (_dtype, _torch_dtype) in DTYPES.items():
            if f"{_stem}.{_tag}.{_dt}" in UNLOADABLE:
                continue
            FIXTURES[f"{_stem}.{_tag}.{_dt}"] = functools.partial(
                _fixture, _build, _family, _exporter, _opset, _dtype, _torch_dtype)
for _dt in ("fp16", "fp32"):
    _dtype, _torch_dtype = DTYPES[_dt]
    FIXTURES[f"f5tts_seed_form.ts17.{_dt}"] = functools.partial(
        _fixture, _seed, "f5tts", "torchscript", 17, _dtype, _torch_dtype)
