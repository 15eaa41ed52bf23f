"""Decoder-LLM fixtures: GPT-2, LLaMA and Qwen2 (GQA) from transformers, tiny random configs.

Each family is exported as a prefill (input_ids, attention_mask -> logits, no cache) and as one
decode step (one new token, past key/values in, logits and present key/values out), by the
TorchScript exporter (opset 17) and the dynamo exporter (opsets 18 and 23), fp32, static shapes.
"""
from __future__ import annotations

import contextlib
import functools

import torch
import transformers
from transformers import masking_utils
from transformers.cache_utils import DynamicCache

import common

BATCH = 2
PREFILL = 8      # prompt length of the prefill fixtures
PAST = 7         # cached length of the decode-step fixtures
VOCAB = 64
LAYERS = 2
HIDDEN = 32      # 4 heads of 8, MLP as wide: keeps every file near 100 KB
HEADS = 4
KV_HEADS = 2     # GQA for LLaMA and Qwen2 (GPT-2 has no GQA: 4 key/value heads)
# Weights drawn with std 0.2, not the libraries' 0.02: after the pre-attention norm, q and k then
# have entries near 1 and the attention scores spread over a few units, so that the softmax is far
# from uniform and a wrong scale or mask shows in the logits beyond the check's tolerance.
INIT_STD = 0.2

EXPORTERS = {"ts17": ("torchscript", 17), "dynamo18": ("dynamo", 18), "dynamo23": ("dynamo", 23)}


def _gpt2(attn: str) -> torch.nn.Module:
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=HIDDEN, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
        initializer_range=INIT_STD)
    return transformers.GPT2LMHeadModel._from_config(config, attn_implementation=attn)


def _llama(attn: str) -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=HIDDEN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=64, tie_word_embeddings=True, initializer_range=INIT_STD)
    return transformers.LlamaForCausalLM._from_config(config, attn_implementation=attn)


def _qwen2(attn: str) -> torch.nn.Module:
    config = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=HIDDEN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=64, tie_word_embeddings=True, use_sliding_window=False,
        initializer_range=INIT_STD)
    return transformers.Qwen2ForCausalLM._from_config(config, attn_implementation=attn)


# fixture-name family -> (builder, key/value heads); the manifest's family is the part before "_"
FAMILIES = {"gpt2": (_gpt2, HEADS), "llama_gqa": (_llama, KV_HEADS),
            "qwen2_gqa": (_qwen2, KV_HEADS)}


class Prefill(torch.nn.Module):
    """input_ids, attention_mask -> logits, without a cache."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).logits


class DecodeStep(torch.nn.Module):
    """input_ids [B, 1], attention_mask [B, past + 1], past key/values flat (key 0, value 0,
    key 1, ...) each [B, kv_heads, past, head_dim] -> logits, present key/values flat."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, *past):
        cache = DynamicCache.from_legacy_cache(
            tuple((past[i], past[i + 1]) for i in range(0, len(past), 2)))
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         past_key_values=cache, use_cache=True)
        present = [t for layer in out.past_key_values.to_legacy_cache() for t in layer]
        return (out.logits, *present)


@contextlib.contextmanager
def masks_without_vmap():
    """transformers 4.53 to 4.5x build their 4D masks with torch.vmap over an indexing mask
    function (sdpa_mask_recent_torch), which the TorchScript tracer cannot follow ("IndexError:
    unordered_map::at" in custom_function_call_vmap). The library's own path for torch < 2.6,
    sdpa_mask_older_torch, builds the same mask with the padding applied outside vmap; the
    TorchScript exports use it (eager_mask calls it through the module global). Newer releases
    build the mask without vmap and no longer have that path: nothing is patched there."""
    older = getattr(masking_utils, "sdpa_mask_older_torch", None)
    if older is None:
        yield
        return
    mapping = masking_utils.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping
    saved = masking_utils.sdpa_mask, mapping["sdpa"]
    masking_utils.sdpa_mask = mapping["sdpa"] = older
    try:
        yield
    finally:
        masking_utils.sdpa_mask, mapping["sdpa"] = saved


def _export(name: str, **kwargs) -> dict:
    torchscript = kwargs["exporter"] == "torchscript"
    with masks_without_vmap() if torchscript else contextlib.nullcontext():
        return _export_checked(name, **kwargs)


def _export_checked(name: str, *, family: str, attn: str, exporter: str, opset: int,
            decode: bool) -> dict:
    build, kv_heads = FAMILIES[family]
    family = family.split("_")[0]
    common.seeded()
    model = build(attn).eval()
    # Zero-initialised biases (GPT-2's, Qwen2's q/k/v) and LayerNorm shifts: give them values, so
    # that a fusion which drops one shows.
    common.redraw_zero_parameters(model, std=INIT_STD)
    ids = torch.randint(0, VOCAB, (BATCH, 1 if decode else PREFILL), dtype=torch.int64)
    fills = {"input_ids": {"int": [0, VOCAB]}, "attention_mask": {"ones": True}}
    if not decode:
        mask = torch.ones(BATCH, PREFILL, dtype=torch.int64)
        return common.export(
            Prefill(model), (ids, mask), name, family=family, exporter=exporter, opset=opset,
            dtype="float32", blocks=LAYERS, input_names=["input_ids", "attention_mask"],
            output_names=["logits"], fills=fills,
            note=f"transformers {family} attn_implementation={attn}, prefill: batch {BATCH}, "
                 f"{PREFILL} tokens, no cache; static shapes")
    head_dim = HIDDEN // HEADS
    past, past_names, present_names = [], [], []
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            past.append(torch.randn(BATCH, kv_heads, PAST, head_dim))
            past_names.append(f"past_key_values.{layer}.{kind}")
            present_names.append(f"present.{layer}.{kind}")
            fills[past_names[-1]] = {"normal": 1.0}
    mask = torch.ones(BATCH, PAST + 1, dtype=torch.int64)
    return common.export(
        DecodeStep(model), (ids, mask, *past), name, family=family, exporter=exporter,
        opset=opset, dtype="float32", blocks=LAYERS,
        input_names=["input_ids", "attention_mask", *past_names],
        output_names=["logits", *present_names], fills=fills,
        note=f"transformers {family} attn_implementation={attn}, one decode step: batch {BATCH}, "
             f"1 new token after {PAST} cached ([B, {kv_heads} kv heads, past, {head_dim}]); "
             f"present = concat(past, new) along axis 2; static shapes")


def _fixtures() -> dict:
    out = {}
    # GPT-2 eager has no SDPA for opset 23 to turn into Attention: its dynamo23 export is the
    # dynamo18 graph byte for byte but for the opset, so it is left out.
    combos = [("gpt2", "eager", tag) for tag in ("ts17", "dynamo18")]
    combos += [("gpt2", "sdpa", tag) for tag in EXPORTERS]
    combos += [(f, "sdpa", tag) for f in ("llama_gqa", "qwen2_gqa") for tag in EXPORTERS]
    combos += [("llama_gqa", "eager", "ts17")]
    for family, attn, tag in combos:
        exporter, opset = EXPORTERS[tag]
        for decode in (False, True):
            stem = family.replace("gpt2", f"gpt2_{attn}") if family == "gpt2" else \
                (family if attn == "sdpa" else f"{family}_{attn}")
            name = f"{stem}{'_decode' if decode else ''}.{tag}.fp32"
            out[name] = functools.partial(_export, family=family, attn=attn, exporter=exporter,
                                          opset=opset, decode=decode)
    return out


FIXTURES = _fixtures()
