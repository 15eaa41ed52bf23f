"""Decoder-LLM fixtures: GPT-2, LLaMA and Qwen2 (GQA) from transformers, tiny random configs.

Each family is exported as a prefill (input_ids, attention_mask -> logits, no cache) and as one
decode step (one new token, past key/values in, logits and present key/values out), by the
TorchScript exporter (opset 17) and the dynamo exporter (opsets 18 and 23), fp32, static shapes.
"""
from __future__ import annotations

import contextlib
import functools
import inspect

import torch
import transformers
try:
    from transformers import masking_utils
except ImportError:  # transformers < 4.53 builds its masks without masking_utils
    masking_utils = None
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
        # The mask covers the past and the new tokens. Said so for torch.export with dynamic
        # past and mask lengths: OPT cuts its positions (mask cumsum) at the past length, and
        # without it their length, so the query's, is a symbol (an is_causal SymBool in sdpa).
        # (The TorchScript tracer's shapes are tensors, which torch._check refuses.)
        if not torch.jit.is_tracing():
            torch._check(attention_mask.shape[1] == past[0].shape[2] + input_ids.shape[1])
        cache = cache_of(past, self.model)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True,
                         **cache_keyword(self.model, cache))
        return (out.logits, *cache_tensors(cache_returned(out)))


def legacy_only(model: torch.nn.Module | None) -> bool:
    """Whether model takes and returns only the legacy cache (tuples of tensors, GPTBigCode's
    fused key/value tensors): the models of older releases (transformers 4.49: GPT-2, BART,
    GPTBigCode) whose PreTrainedModel says _supports_cache_class = False. The attribute is gone
    from later releases (4.57 on), where every model takes a Cache."""
    return model is not None and getattr(model, "_supports_cache_class", True) is False


class _UnguardedCache(DynamicCache):
    """transformers < 4.56's DynamicCache (key_cache / value_cache lists) with the same
    get_seq_length and update, but for a layer's tensor tested by its type instead of
    len(tensor) == 0: len() of a tensor is a Python int, so torch.export (torch 2.6) fixes the
    tensor's first axis, the batch, to its size at the export (the graph then fails at another
    batch, e.g. a Concat or Reshape of batch 2 against 3)."""

    def get_seq_length(self, layer_idx: int | None = 0) -> int:
        if len(self.key_cache) <= layer_idx or \
                not isinstance(self.key_cache[layer_idx], torch.Tensor):
            return super().get_seq_length(layer_idx)
        return self.key_cache[layer_idx].shape[-2]

    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        if key_states is None or len(self.key_cache) <= layer_idx or \
                not isinstance(self.key_cache[layer_idx], torch.Tensor):
            return super().update(key_states, value_states, layer_idx, cache_kwargs)
        if layer_idx == 0:
            self._seen_tokens += key_states.shape[-2]
        self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
        self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states],
                                                dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]


def cache_of(flat, model: torch.nn.Module | None = None):
    """A DynamicCache holding the flat key 0, value 0, key 1, ... tensors: through
    from_legacy_cache where the release has it (transformers 4.x), through the constructor's
    ddp_cache_data where it does not (transformers 5 removed from_legacy_cache). For a
    legacy_only model, the legacy cache instead: (key, value) tuples, or for GPTBigCode one
    tensor a layer, key and value concatenated along the last axis ([batch, past, 2 * head_dim]
    for multi-query, whose single key/value head is squeezed out)."""
    pairs = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat), 2))
    if legacy_only(model) and getattr(model.config, "model_type", "") == "gpt_bigcode":
        multi_query = getattr(model.config, "multi_query", False)
        return [torch.cat((k.squeeze(1), v.squeeze(1)) if multi_query else (k, v), dim=-1)
                for k, v in pairs]
    if legacy_only(model):
        return pairs
    if not hasattr(DynamicCache(), "layers"):  # transformers < 4.56: lists of tensors
        return _UnguardedCache.from_legacy_cache(pairs)
    if hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(pairs)
    return DynamicCache(pairs)


def cache_tensors(cache) -> list[torch.Tensor]:
    """key 0, value 0, key 1, ... of a cache: its layers' keys and values (transformers 4.56
    on), or its legacy tuples where it has no layers. Of an EncoderDecoderCache, the
    self-attention cache's (GPTBigCode keeps its own cache in one in transformers 4.57)."""
    cache = getattr(cache, "self_attention_cache", cache)
    if hasattr(cache, "layers"):
        return [t for layer in cache.layers for t in (layer.keys, layer.values)]
    if isinstance(cache, (tuple, list)):
        # A legacy cache (transformers 4.49's GPT-2, OPT and Bloom without a Cache passed in,
        # BART with its cross-attention pair after the self-attention one): (key, value, ...)
        # a layer; GPTBigCode's: one tensor a layer, key and value concatenated along the last
        # axis, [batch, tokens, 2 * head_dim] for multi-query (given back with its 1 head).
        out = []
        for layer in cache:
            if isinstance(layer, torch.Tensor):
                k, v = layer.chunk(2, dim=-1)
                layer = (k.unsqueeze(1), v.unsqueeze(1)) if layer.dim() == 3 else (k, v)
            out += list(layer[:2])
        return out
    return [t for layer in cache.to_legacy_cache() for t in layer]


def cache_keyword(model: torch.nn.Module, cache) -> dict:
    """{name: cache} for model's forward: "cache" where the release renamed past_key_values
    (transformers 5.2x, which still takes the old name with a deprecation warning),
    "past_key_values" before."""
    names = inspect.signature(model.forward).parameters
    return {"cache" if "cache" in names else "past_key_values": cache}


def cache_returned(out):
    """The cache a model's output holds: out.cache (transformers 5.2x) or out.past_key_values."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


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
