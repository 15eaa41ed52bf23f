"""Encoder fixtures of the held-out set: BERT, ViT, Swin, CLIP text, the BART encoder, the Whisper
encoder, the T5 encoder and (from the transformers-5.24 set on) DeBERTa-v2 from transformers, tiny
random configs built from their config classes (no hub downloads).

Each is exported by the TorchScript exporter (opset 17) and the dynamo exporter (opset 18), fp32,
with the model's own attention implementation ("sdpa" where it has one); BERT in float16 as well
(bert.TAG.fp16: the model halved). Text encoders take
input_ids and attention_mask (a padding mask: the export inputs leave the first row's last tokens
padded) with dynamic batch and sequence; ViT and Swin take pixel_values and Whisper
input_features, dynamic in batch only (the image size and the mel length are fixed by the position
embeddings and Swin's windows).

Swin (SwinModel) attends within 4x4 windows, batch and windows folded into the attention's batch
axis, with a relative position bias [1, heads, N, N] (N = 16) added to the scores; the second
block of each stage is a shifted window block (cyclic shift by 2), whose scores get the shifted
windows' attention mask [windows, N, N] (0 or -100) as well: transformers 4.x adds it to the
scores viewed as [batch, windows, heads, N, N] (eager attention, the 5-D view's batch being the
folded batch // windows), 5.x expands it to [batch * windows, 1, N, N] and adds it to the bias
before its attention ("sdpa").
"""
from __future__ import annotations

import functools

import torch
import transformers

import common

BATCH = 2
SEQ = 8          # tokens of the export inputs
RECHECK = (3, 5)  # batch, tokens of the second check: a fixed axis shows there
VOCAB = 64
LAYERS = 2
HIDDEN = 32      # 4 heads of 8
HEADS = 4
FFN = 64
# Weights drawn wider than the libraries' 0.02, as the decoder fixtures do: the attention scores
# then spread over a few units, and a wrong scale or mask shows in the outputs.
INIT_STD = 0.2


class TextEncoder(torch.nn.Module):
    """input_ids, attention_mask -> last_hidden_state (and the outputs `extra` names)."""

    def __init__(self, model: torch.nn.Module, extra: tuple[str, ...] = ()):
        super().__init__()
        self.model, self.extra = model, extra

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return (out.last_hidden_state, *(getattr(out, e) for e in self.extra))


class UserCall(torch.nn.Module):
    """input_ids, attention_mask -> encoder(input_ids, attention_mask)['last_hidden_state']: the
    call as a user writes it (positional arguments, default return_dict, the output indexed by
    name)."""

    def __init__(self, encoder: torch.nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids, attention_mask)["last_hidden_state"]


class FeatureEncoder(torch.nn.Module):
    """pixel_values or input_features (keyword `name`) -> last_hidden_state."""

    def __init__(self, model: torch.nn.Module, name: str):
        super().__init__()
        self.model, self.name = model, name

    def forward(self, features):
        return self.model(**{self.name: features}, return_dict=True).last_hidden_state


def _text_inputs(batch: int, seq: int):
    ids = torch.randint(3, VOCAB, (batch, seq), dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[0, -max(1, seq // 4):] = 0  # row 0 right-padded: the padding mask matters
    return ids, mask


def _bert():
    config = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=64,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=INIT_STD)
    model = transformers.BertModel._from_config(config, attn_implementation="sdpa")
    return model, "text", ("pooler_output",), "BertModel (pooler included)"


def _clip_text():
    config = transformers.CLIPTextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, max_position_embeddings=32, attention_dropout=0.0,
        initializer_range=INIT_STD, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        projection_dim=HIDDEN)
    model = transformers.CLIPTextModel._from_config(config, attn_implementation="sdpa")
    return model, "text", ("pooler_output",), "CLIPTextModel (causal + padding mask, pooler at EOS)"


def _bart_encoder():
    config = transformers.BartConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=LAYERS, decoder_layers=1,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, init_std=INIT_STD)
    model = transformers.BartModel._from_config(config, attn_implementation="sdpa").get_encoder()
    return model, "text", (), "BartModel.get_encoder() (BartEncoder)"


def _t5_encoder():
    config = transformers.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
        num_heads=HEADS, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        dropout_rate=0.0, initializer_factor=1.0, feed_forward_proj="gated-gelu")
    model = transformers.T5EncoderModel._from_config(config)
    return model, "text", (), "T5EncoderModel (relative position bias, gated-gelu)"


def _deberta_v2():
    # DeBERTa-v3's layout: disentangled relative attention (content-to-position and
    # position-to-content terms added to the scores), log-bucketed relative positions shared
    # through the query and key projections, no absolute positions. transformers 5.24.0 refuses
    # "sdpa" for it ("does not support an attention implementation through
    # torch.nn.functional.scaled_dot_product_attention yet"): its own eager attention.
    config = transformers.DebertaV2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, intermediate_size=FFN, max_position_embeddings=64,
        relative_attention=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
        max_relative_positions=16, share_att_key=True, norm_rel_ebd="layer_norm",
        position_biased_input=False, type_vocab_size=0, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, initializer_range=INIT_STD, pad_token_id=0)
    model = transformers.DebertaV2Model._from_config(config, attn_implementation="eager")
    return model, "text", (), ("DebertaV2Model attn_implementation=eager (relative attention "
                               "c2p|p2c, 8 log position buckets up to 16)")


VIT_IMAGE, VIT_PATCH = 32, 8   # 16 patches + CLS


def _vit():
    config = transformers.ViTConfig(
        hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, image_size=VIT_IMAGE, patch_size=VIT_PATCH, num_channels=3,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=INIT_STD)
    model = transformers.ViTModel._from_config(config, attn_implementation="sdpa",
                                               add_pooling_layer=False)
    return model, "image", (), f"ViTModel, {VIT_IMAGE}x{VIT_IMAGE} image, patch {VIT_PATCH}"


# 32x32 image, patch 2: 16x16 tokens in stage 1 (16 windows of 4x4), patch merging to 8x8 in
# stage 2 (4 windows). Both resolutions exceed the window, so each stage's second block shifts
# (shift_size = window // 2; a stage no larger than its window would neither shift nor split).
SWIN_PATCH, SWIN_WINDOW = 2, 4
SWIN_EMBED, SWIN_DEPTHS, SWIN_HEADS = 16, (2, 2), (2, 4)   # dims 16 then 32: heads of 8


def _swin(attention: str | None = None):
    config = transformers.SwinConfig(
        image_size=VIT_IMAGE, patch_size=SWIN_PATCH, num_channels=3, embed_dim=SWIN_EMBED,
        depths=list(SWIN_DEPTHS), num_heads=list(SWIN_HEADS), window_size=SWIN_WINDOW,
        mlp_ratio=2.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        drop_path_rate=0.0, initializer_range=INIT_STD)
    # transformers 4.x's Swin has only its eager attention; 5.x routes it through "sdpa".
    attention = attention or ("sdpa" if getattr(transformers.SwinModel, "_supports_sdpa", False)
                              else "eager")
    model = transformers.SwinModel._from_config(config, attn_implementation=attention,
                                                add_pooling_layer=False)
    return model, "image", (), (f"SwinModel attn_implementation={attention}, {VIT_IMAGE}x"
                                f"{VIT_IMAGE} image, patch {SWIN_PATCH}, window {SWIN_WINDOW} "
                                f"(shift {SWIN_WINDOW // 2} in each stage's second block)")


WHISPER_MELS, WHISPER_POSITIONS = 16, 16   # input_features [B, 16, 32]


def _whisper_encoder():
    config = transformers.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=WHISPER_MELS, d_model=HIDDEN, encoder_layers=LAYERS,
        decoder_layers=1, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_source_positions=WHISPER_POSITIONS,
        max_target_positions=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        init_std=INIT_STD, pad_token_id=1, bos_token_id=2, eos_token_id=2,
        decoder_start_token_id=3, suppress_tokens=None, begin_suppress_tokens=None)
    model = transformers.WhisperModel._from_config(config, attn_implementation="sdpa").get_encoder()
    return model, "audio", (), (f"WhisperModel.get_encoder(), {WHISPER_MELS} mel bins, "
                                f"{2 * WHISPER_POSITIONS} frames")


FAMILIES = {"bert": _bert, "vit": _vit, "swin": _swin, "bart_encoder": _bart_encoder,
            "whisper_encoder": _whisper_encoder, "clip_text": _clip_text,
            "t5_encoder": _t5_encoder, "deberta_v2": _deberta_v2}


# Families not of HIDDEN, HEADS and LAYERS: family -> (attention blocks, the note's sizes).
_OWN_SIZES = {
    "swin": (sum(SWIN_DEPTHS), f"embed dims {SWIN_EMBED} then {2 * SWIN_EMBED}, heads "
                               f"{SWIN_HEADS} of {SWIN_EMBED // SWIN_HEADS[0]}, depths "
                               f"{SWIN_DEPTHS}"),
}


def _inputs(kind: str, batch: int, seq: int):
    if kind == "text":
        return _text_inputs(batch, seq)
    if kind == "image":
        return (torch.randn(batch, 3, VIT_IMAGE, VIT_IMAGE),)
    return (torch.randn(batch, WHISPER_MELS, 2 * WHISPER_POSITIONS),)


def _export(name: str, *, family: str, exporter: str, opset: int, static: bool = False,
            dtype: str = "float32", attention: str | None = None) -> dict:
    """`attention`: an attn_implementation in place of the family's own (builders that take it)."""
    common.seeded()
    model, kind, extra, what = FAMILIES[family](**({"attention": attention} if attention else {}))
    model = model.eval()
    common.redraw_zero_parameters(model, std=INIT_STD)
    model = model.to(getattr(torch, dtype))
    assert kind == "text" or dtype == "float32", "feature inputs are drawn in float32"
    if kind == "text":
        input_names = ["input_ids", "attention_mask"]
        dynamic = {n: {0: "batch", 1: "sequence"} for n in input_names}
        fills = {"input_ids": {"int": [3, VOCAB]}, "attention_mask": {"ones": True}}
        shapes = (f"input_ids, attention_mask [batch, sequence] dynamic (row 0 right-padded at "
                  f"the export, batch {BATCH}, {SEQ} tokens)")
    else:
        input_names = ["pixel_values" if kind == "image" else "input_features"]
        dynamic = {input_names[0]: {0: "batch"}}
        fills = {}
        shapes = f"{input_names[0]} dynamic in batch only (batch {BATCH} at the export)"
    output_names = ["last_hidden_state", *extra]
    blocks, sizes = _OWN_SIZES.get(family, (LAYERS, f"hidden {HIDDEN}, {HEADS} heads of "
                                                    f"{HIDDEN // HEADS}, {LAYERS} layers"))
    args = _inputs(kind, BATCH, SEQ)
    if static:
        dynamic = None
        shapes = (f"static shapes: batch {BATCH}, {SEQ} tokens" if kind == "text" else
                  f"static shapes: {input_names[0]} {list(args[0].shape)}")
    common.seeded(1)
    recheck = None if static else _inputs(kind, *RECHECK)
    return common.export(
        TextEncoder(model, extra) if kind == "text" else FeatureEncoder(model, input_names[0]),
        args, name, family=family,
        exporter=exporter, opset=opset, dtype=dtype, blocks=blocks, input_names=input_names,
        output_names=output_names, dynamic=dynamic, fills=fills, recheck=recheck,
        note=f"transformers {what}, {sizes}; {shapes}{_HALF_NOTE[dtype]}")


_HALF_NOTE = {"float32": "", "float16": "; float16: the model halved"}

FIXTURES = common.fp32_matrix(FAMILIES, _export, "family")
# BERT in float16, both exporters (NAME.TAG.fp16).
for _tag, (_exporter, _opset) in common.HELDOUT_EXPORTERS.items():
    FIXTURES[f"bert.{_tag}.fp16"] = functools.partial(
        _export, family="bert", exporter=_exporter, opset=_opset, dtype="float16")
# The dynamo exporter fails on the T5 encoder with dynamic batch and sequence (its decomposition
# step: "Cannot view a tensor with shape [s72, s53, 4, 8] and strides (32*s53, 8, 8*s53, 1) as a
# tensor with shape (s72, s53, 32)", torch 2.15.0): the same export with static shapes beside it.
FIXTURES["t5_encoder_static.dynamo18.fp32"] = functools.partial(
    _export, family="t5_encoder", exporter="dynamo", opset=18, static=True)
# The same step fails on Swin with "sdpa" (transformers 5.24.0), at the attention output's
# reshape(*input_shape, -1), with a dynamic batch ("Cannot view a tensor with shape
# torch.Size([16*s97, 16, 2, 8]) and strides (256, 8, 128, 1) as a tensor with shape
# (16*s97, 16, 16)!", torch 2.15.0) and with static shapes alike ([32, 16, 2, 8] as (32, 16, 16)):
# where Swin has "sdpa", its eager attention beside it (4.x's Swin is eager already).
if getattr(transformers.SwinModel, "_supports_sdpa", False):
    FIXTURES["swin_eager.dynamo18.fp32"] = functools.partial(
        _export, family="swin", exporter="dynamo", opset=18, attention="eager")


def _export_user_call(name: str, *, family: str, exporter: str, opset: int,
                      functions: bool) -> dict:
    """A text encoder exported as a user does it: UserCall, dynamic batch and sequence; with
    `functions`, export_modules_as_functions={the class of layers[0].self_attn}, each attention
    an ONNX local function (model.functions)."""
    common.seeded()
    model, kind, _, what = FAMILIES[family]()
    assert kind == "text", family
    model = model.eval()
    common.redraw_zero_parameters(model, std=INIT_STD)
    attention = type(model.layers[0].self_attn)
    input_names = ["input_ids", "attention_mask"]
    args = _text_inputs(BATCH, SEQ)
    common.seeded(1)
    recheck = _text_inputs(*RECHECK)
    how = (f"export_modules_as_functions={{{attention.__name__}}} (each attention a local "
           f"function; block count and chain read the inlined model)" if functions
           else "no local functions")
    return common.export(
        UserCall(model), args, name, family=family, exporter=exporter, opset=opset,
        dtype="float32", blocks=LAYERS, input_names=input_names,
        output_names=["last_hidden_state"],
        dynamic={n: {0: "batch", 1: "sequence"} for n in input_names},
        fills={"input_ids": {"int": [3, VOCAB]}, "attention_mask": {"ones": True}},
        recheck=recheck, functions={attention} if functions else None,
        note=f"transformers {what} called as encoder(input_ids, attention_mask)"
             f"['last_hidden_state'], {how}; hidden {HIDDEN}, {HEADS} heads of "
             f"{HIDDEN // HEADS}, {LAYERS} layers; input_ids, attention_mask [batch, sequence] "
             f"dynamic (row 0 right-padded at the export, batch {BATCH}, {SEQ} tokens)")


# The BART encoder as a user exports it, TorchScript at opset 20, with each BartAttention an ONNX
# local function and, for comparison, without. torch 2.15.0's export_modules_as_functions raises
# a TypeError on transformers 5.24.0 models (_jit_pass_onnx_track_scope_attributes(): incompatible
# function arguments, from BartEncoder's class annotations): common.export keeps only the
# attributes of the function classes (BartAttention has none), see _function_attributes_only.
FIXTURES["bart_encoder_functions.ts20.fp32"] = functools.partial(
    _export_user_call, family="bart_encoder", exporter="torchscript", opset=20, functions=True)
FIXTURES["bart_encoder.ts20.fp32"] = functools.partial(
    _export_user_call, family="bart_encoder", exporter="torchscript", opset=20, functions=False)
