"""Decoder-LLM fixtures of the held-out set: LLaMA, Qwen3, Mistral, GPT-2 (sdpa and eager), Phi-3,
GPT-NeoX, OPT, Bloom, Gemma 2 and GPTBigCode from transformers, and (from the transformers-5.24 set
on) DeepSeek V3, Falcon (multi-query, sdpa and eager), Phi, DiffLlama and JetMoE, tiny random
configs built from their config classes (no hub downloads).

Each is exported as a prefill (input_ids, attention_mask -> logits, no cache) with dynamic batch
and sequence, and as one decode step (STEM_decode: input_ids [batch, 1], attention_mask
[batch, past + 1], past key/values in, logits and present key/values out) with dynamic batch and
past length, by the TorchScript exporter (opset 17) and the dynamo exporter (opset 18), fp32;
LLaMA and GPT-2 (sdpa) in float16 as well (NAME.TAG.fp16), LLaMA in bfloat16 (NAME.TAG.bf16).
"""
from __future__ import annotations

import contextlib
import functools

import torch
import transformers

import common
import decoders
from decoders import Prefill

BATCH = 2
PREFILL = 8
RECHECK = (3, 5)  # batch, tokens of the second check: a fixed axis shows there
VOCAB = 64
LAYERS = 2
HIDDEN = 32      # 4 heads of 8
HEADS = 4
KV_HEADS = 2     # GQA where the family has it
INIT_STD = 0.2   # as decoders.py: attention scores spread over a few units
_HALF_NOTE = {"float32": "", "float16": "; float16: the model halved, past key/values float16",
              "bfloat16": "; bfloat16: the model in bfloat16, past key/values bfloat16"}


def _common_kwargs(**extra):
    return dict(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=HIDDEN * 2,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=64,
                initializer_range=INIT_STD, tie_word_embeddings=True, **extra)


def _llama():
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(
        **_common_kwargs(num_key_value_heads=KV_HEADS)), f"GQA {HEADS}/{KV_HEADS}"


def _qwen3():
    return transformers.Qwen3ForCausalLM, transformers.Qwen3Config(
        **_common_kwargs(num_key_value_heads=KV_HEADS, head_dim=HIDDEN // HEADS,
                         use_sliding_window=False)), f"GQA {HEADS}/{KV_HEADS}, q/k RMSNorm"


def _mistral():
    return transformers.MistralForCausalLM, transformers.MistralConfig(
        **_common_kwargs(num_key_value_heads=KV_HEADS)), \
        f"GQA {HEADS}/{KV_HEADS}, config's default sliding_window"


def _phi3():
    return transformers.Phi3ForCausalLM, transformers.Phi3Config(
        **_common_kwargs(num_key_value_heads=KV_HEADS, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, resid_pdrop=0.0,
                         embd_pdrop=0.0, attention_dropout=0.0)), \
        f"fused qkv_proj, GQA {HEADS}/{KV_HEADS}"


def _gpt_neox():
    return transformers.GPTNeoXForCausalLM, transformers.GPTNeoXConfig(
        **_common_kwargs(rotary_pct=0.5, hidden_dropout=0.0, attention_dropout=0.0,
                         use_parallel_residual=True)), "partial rotary 0.5, parallel residual"


def _opt():
    return transformers.OPTForCausalLM, transformers.OPTConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, ffn_dim=HIDDEN * 2, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, max_position_embeddings=64, word_embed_proj_dim=HIDDEN,
        dropout=0.0, attention_dropout=0.0, init_std=INIT_STD, pad_token_id=1,
        enable_bias=True), "learned positions from the mask's cumsum"


def _bloom():
    return transformers.BloomForCausalLM, transformers.BloomConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        hidden_dropout=0.0, attention_dropout=0.0, initializer_range=INIT_STD), "ALiBi"


def _gemma2():
    return transformers.Gemma2ForCausalLM, transformers.Gemma2Config(
        **_common_kwargs(num_key_value_heads=KV_HEADS, head_dim=HIDDEN // HEADS,
                         query_pre_attn_scalar=HIDDEN // HEADS, sliding_window=4,
                         attn_logit_softcapping=50.0, final_logit_softcapping=30.0)), \
        (f"GQA {HEADS}/{KV_HEADS}, sliding window 4 on alternate layers, softcapping 50 "
         f"(attention) / 30 (logits)")


def _gpt_bigcode():
    return transformers.GPTBigCodeForCausalLM, transformers.GPTBigCodeConfig(
        vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=HIDDEN * 2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        multi_query=True, initializer_range=INIT_STD, bos_token_id=0, eos_token_id=0), \
        "multi-query attention"


def _gpt2():
    return transformers.GPT2LMHeadModel, transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=HIDDEN * 2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        tie_word_embeddings=True, initializer_range=INIT_STD, bos_token_id=0,
        eos_token_id=0), "MHA"


def _qwen2():
    return transformers.Qwen2ForCausalLM, transformers.Qwen2Config(
        **_common_kwargs(num_key_value_heads=KV_HEADS, use_sliding_window=False)), \
        f"GQA {HEADS}/{KV_HEADS}, q/k/v biases"


def _deepseek_v3():
    # Multi-head latent attention: q and k heads of 16 + 8 (the rotary part, shared by the heads
    # of k), v heads of 16, k and v expanded from a latent of kv_lora_rank (transformers 5.24
    # caches the latent and the shared rotary key); first_k_dense_replace = LAYERS keeps every
    # MLP dense (no routing).
    return transformers.DeepseekV3ForCausalLM, transformers.DeepseekV3Config(
        **_common_kwargs(num_key_value_heads=HEADS, q_lora_rank=24, kv_lora_rank=16,
                         qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
                         first_k_dense_replace=LAYERS, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2)), \
        ("multi-head latent attention: q/k heads of 16 + 8 rotary, v heads of 16, keys and "
         "values expanded from a latent of 16 and a shared rotary key of 8 (what the cache "
         "holds); dense MLPs")


def _falcon_mqa():
    # Falcon-7B's layout: one key/value head for all query heads, parallel attention and MLP.
    return transformers.FalconForCausalLM, transformers.FalconConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False,
        max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0,
        initializer_range=INIT_STD, bos_token_id=0, eos_token_id=0), \
        "multi_query (1 key/value head), parallel attention, rotary"


def _phi():
    return transformers.PhiForCausalLM, transformers.PhiConfig(
        **_common_kwargs(partial_rotary_factor=0.5, resid_pdrop=0.0, embd_pdrop=0.0,
                         attention_dropout=0.0)), "partial rotary 0.5, q/k/v biases"


def _diffllama():
    return transformers.DiffLlamaForCausalLM, transformers.DiffLlamaConfig(
        **_common_kwargs(num_key_value_heads=KV_HEADS)), \
        (f"differential attention (two attention calls sharing q and k over the two halves of "
         f"v), GQA {HEADS}/{KV_HEADS}")


def _jetmoe():
    # Mixture of attention heads: the query (and the output) projections routed to the top 2 of
    # 4 experts per token, 2 key/value heads repeated for the 2 chosen experts: 4 query heads.
    return transformers.JetMoeForCausalLM, transformers.JetMoeConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=HIDDEN * 2,
        num_hidden_layers=LAYERS, num_key_value_heads=KV_HEADS, kv_channels=HIDDEN // HEADS,
        num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
        initializer_range=INIT_STD, tie_word_embeddings=True), \
        ("mixture of attention heads and MoE MLPs (top 2 of 4 experts), 2 kv heads x 2 experts; "
         "3 Softmaxes a layer: the attention's and the two routers'")


# fixture stem -> (builder, attn_implementation): "sdpa", the default, but for GPT-2's second
# export and for Bloom and Gemma 2, which refuse "sdpa" (transformers 5.24.0: "does not support an
# attention implementation through torch.nn.functional.scaled_dot_product_attention yet")
FAMILIES = {
    "llama": (_llama, "sdpa"), "qwen3": (_qwen3, "sdpa"), "mistral": (_mistral, "sdpa"),
    "gpt2_sdpa": (_gpt2, "sdpa"), "gpt2_eager": (_gpt2, "eager"), "phi3": (_phi3, "sdpa"),
    "gpt_neox": (_gpt_neox, "sdpa"), "opt": (_opt, "sdpa"), "bloom": (_bloom, "eager"),
    "gemma2": (_gemma2, "eager"), "gpt_bigcode": (_gpt_bigcode, "sdpa"), "qwen2": (_qwen2, "sdpa"),
}
# Families added with the transformers-5.24 set's exports (the older sets were exported before
# them and hold none of their fixtures).
FAMILIES.update({
    "deepseek_v3": (_deepseek_v3, "sdpa"), "falcon_mqa_sdpa": (_falcon_mqa, "sdpa"),
    "falcon_mqa_eager": (_falcon_mqa, "eager"), "phi": (_phi, "sdpa"),
    "diffllama": (_diffllama, "sdpa"), "jetmoe": (_jetmoe, "sdpa"),
})


def _family(stem: str) -> str:
    """The manifest's family of a stem: without the attention implementation, Falcon's "_mqa"
    (the layout, not another family) or the decode step's suffix."""
    return stem.removesuffix("_decode").removesuffix("_sdpa").removesuffix("_eager") \
        .removesuffix("_mqa")


def _inputs(batch: int, seq: int):
    ids = torch.randint(0, VOCAB, (batch, seq), dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    # Row 0 right-padded: its queries all still see a key (left padding leaves the first queries
    # of a causal prefill with none: rows of NaN in torch and in ONNX Runtime alike).
    mask[0, -max(1, seq // 4):] = 0
    return ids, mask


@contextlib.contextmanager
def _masks_broadcast():
    """The path decoders.masks_without_vmap gives the TorchScript exports (transformers 4.53 to
    4.5x, sdpa_mask_older_torch) still vmaps its mask function over the query and key positions,
    and the tracer records vmap's reshape of the query positions with the export's length
    ([8, 1]): a prefill of another length fails in ONNX Runtime. The functions it vmaps (causal,
    sliding window, chunk) compare positions elementwise, so broadcasting [q, 1] against [kv]
    builds the same [q, kv] mask. Releases without that helper: nothing is patched."""
    masking_utils = getattr(decoders, "masking_utils", None)
    vmapped = getattr(masking_utils, "_vmap_for_bhqkv", None)
    if vmapped is None or not hasattr(masking_utils, "sdpa_mask_older_torch"):
        yield
        return

    def broadcast(mask_function, bh_indices=True):
        if bh_indices:
            return vmapped(mask_function, bh_indices)
        return lambda b, h, q, kv: mask_function(b, h, q[:, None], kv[None, :])

    masking_utils._vmap_for_bhqkv = broadcast
    try:
        yield
    finally:
        masking_utils._vmap_for_bhqkv = vmapped


def _export(name: str, *, stem: str, exporter: str, opset: int, dtype: str = "float32") -> dict:
    build, attn = FAMILIES[stem]
    common.seeded()
    cls, config, what = build()
    model = cls._from_config(config, attn_implementation=attn).eval()
    common.redraw_zero_parameters(model, std=INIT_STD)
    model = model.to(getattr(torch, dtype))
    args = _inputs(BATCH, PREFILL)
    common.seeded(1)
    recheck = _inputs(*RECHECK)
    names = ["input_ids", "attention_mask"]
    family = _family(stem)
    torchscript = exporter == "torchscript"
    with decoders.masks_without_vmap() if torchscript else contextlib.nullcontext(), \
            _masks_broadcast() if torchscript else contextlib.nullcontext():
        return common.export(
            Prefill(model), args, name, family=family, exporter=exporter, opset=opset,
            dtype=dtype, blocks=LAYERS, input_names=names,
            output_names=["logits"],
            dynamic={n: {0: "batch", 1: "sequence"} for n in names},
            fills={"input_ids": {"int": [0, VOCAB]}, "attention_mask": {"ones": True}},
            recheck=recheck,
            note=f"transformers {cls.__name__} attn_implementation={attn}, {what}; hidden "
                 f"{HIDDEN}, {HEADS} heads, {LAYERS} layers; prefill, no cache; input_ids, "
                 f"attention_mask [batch, sequence] dynamic (row 0 right-padded at the export, "
                 f"batch {BATCH}, {PREFILL} tokens){_HALF_NOTE[dtype]}")


FIXTURES = common.fp32_matrix(FAMILIES, _export, "stem")

# Exports that are written but cannot be kept, with why (listed in the manifest's not_exported).
UNLOADABLE = {
    f"jetmoe{step}.ts17.fp32": (
        "the TorchScript exporter writes JetMoE's combine of each token's top-2 experts "
        "(index_add over the routed tokens, every token index twice) as ScatterElements without "
        "a reduction, which keeps one expert's output instead of their sum: the logits differ "
        "from torch's at the export's own inputs (torch 2.15.0)")
    for step in ("", "_decode")}


# One decode step of each family: one new token after PAST cached ones, the cache the release's
# own class (DynamicCache) filled from graph inputs; dynamic batch and past length.
PAST = 7
RECHECK_DECODE = (3, 4)  # batch, cached tokens of the second check


def _cache_layout(model: torch.nn.Module) -> list[tuple[int, int]]:
    """(heads, head_dim) of each cached tensor (key 0, value 0, key 1, ...), as the model's own
    cache holds them after a 2-token prompt: [batch, heads, tokens, head_dim] in transformers 5
    for every family (Bloom's [batch * heads, ...] and GPTBigCode's fused key/value layouts are
    gone; GPTBigCode's multi-query cache has 1 head)."""
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, 2, dtype=torch.int64), use_cache=True)
    cache = decoders.cache_returned(out)
    if not isinstance(cache, (tuple, list)) and not hasattr(cache, "layers") and \
            not hasattr(cache, "to_legacy_cache"):
        # transformers 4.49's Gemma 2: a HybridCache, whose sliding-window layers keep only the
        # window; its layers slice the mask to the window, so a DynamicCache's full-length keys
        # do not fit ("size of tensor a (8) must match the size of tensor b (4)").
        raise NotImplementedError(
            f"{type(cache).__name__}: the release's {type(model).__name__} decodes only with "
            f"its own fixed-length cache (max_cache_len buffers, cache_position), no "
            f"DynamicCache of dynamic past length")
    layout = []
    for t in decoders.cache_tensors(cache):
        assert t.dim() == 4 and t.shape[0] == 1, f"cache tensor of shape {tuple(t.shape)}"
        layout.append((t.shape[1], t.shape[3]))
    return layout


def _decode_inputs(layout, batch: int, past: int, dtype: torch.dtype = torch.float32):
    ids = torch.randint(0, VOCAB, (batch, 1), dtype=torch.int64)
    mask = torch.ones(batch, past + 1, dtype=torch.int64)
    mask[0, :max(1, past // 3)] = 0  # row 0 left-padded, as a batched prompt is
    return (ids, mask, *(torch.randn(batch, heads, past, dim).to(dtype) for heads, dim in layout))


def _export_decode(name: str, *, stem: str, exporter: str, opset: int,
                   dtype: str = "float32") -> dict:
    stem = stem.removesuffix("_decode")
    build, attn = FAMILIES[stem]
    common.seeded()
    cls, config, what = build()
    model = cls._from_config(config, attn_implementation=attn).eval()
    common.redraw_zero_parameters(model, std=INIT_STD)
    layout = _cache_layout(model)
    model = model.to(getattr(torch, dtype))
    args = _decode_inputs(layout, BATCH, PAST, getattr(torch, dtype))
    common.seeded(1)
    recheck = _decode_inputs(layout, *RECHECK_DECODE, getattr(torch, dtype))
    past_names = [f"past_key_values.{i // 2}.{'value' if i % 2 else 'key'}"
                  for i in range(len(layout))]
    present_names = [p.replace("past_key_values", "present") for p in past_names]
    dynamic = {"input_ids": {0: "batch"}, "attention_mask": {0: "batch", 1: "total_sequence"},
               "logits": {0: "batch"},
               **{n: {0: "batch", 2: "past_sequence"} for n in past_names},
               **{n: {0: "batch", 2: "total_sequence"} for n in present_names}}
    fills = {"input_ids": {"int": [0, VOCAB]}, "attention_mask": {"ones": True},
             **{n: {"normal": 1.0} for n in past_names}}
    family = _family(stem)
    heads = sorted({h for h, _ in layout})
    # DeepSeek V3 caches, as a layer's key and value, its compressed latent and its shared
    # rotary key, of other sizes.
    dims = layout[0][1] if layout[0][1] == layout[1][1] else f"{layout[0][1]} / {layout[1][1]}"
    torchscript = exporter == "torchscript"
    with decoders.masks_without_vmap() if torchscript else contextlib.nullcontext(), \
            _masks_broadcast() if torchscript else contextlib.nullcontext():
        return common.export(
            decoders.DecodeStep(model), args, name, family=family, exporter=exporter,
            opset=opset, dtype=dtype, blocks=LAYERS,
            input_names=["input_ids", "attention_mask", *past_names],
            output_names=["logits", *present_names], dynamic=dynamic, fills=fills,
            recheck=recheck,
            note=f"transformers {cls.__name__} attn_implementation={attn}, {what}; hidden "
                 f"{HIDDEN}, {HEADS} heads, {LAYERS} layers; one decode step: input_ids "
                 f"[batch, 1], attention_mask [batch, past + 1], past key/values [batch, "
                 f"{'/'.join(map(str, heads))} kv heads, past, {dims}] through the "
                 f"release's DynamicCache; batch and past dynamic (row 0 left-padded at the "
                 f"export, batch {BATCH}, {PAST} cached tokens){_HALF_NOTE[dtype]}")


FIXTURES.update(common.fp32_matrix([f"{stem}_decode" for stem in FAMILIES], _export_decode,
                                   "stem"))
for _name in UNLOADABLE:
    del FIXTURES[_name]


# Half-precision forms, prefill and decode step: float16 of two families (half-precision graphs
# insert their own casts, masks' finfo(float16).min and RMSNorm's float32 upcast, around the
# attention) and bfloat16 of LLaMA (ONNX Runtime's CPU provider has no bfloat16 kernels, so the
# export check and the conformance suite run it in the ONNX reference evaluator). LLaMA's
# TorchScript bfloat16 exports fail (torch 2.15.0, transformers 5.24.0: "ScalarType ComplexDouble
# is an unexpected tensor scalar type", raised by _export_onnx after the constant-folding pass;
# with do_constant_folding=False the graph exports): listed in the manifest's not_exported.
HALF_FORMS = {"fp16": ("float16", ("llama", "gpt2_sdpa")), "bf16": ("bfloat16", ("llama",))}
for _suffix, (_dtype, _stems) in HALF_FORMS.items():
    for _stem in _stems:
        for _tag, (_exporter, _opset) in common.HELDOUT_EXPORTERS.items():
            FIXTURES[f"{_stem}.{_tag}.{_suffix}"] = functools.partial(
                _export, stem=_stem, exporter=_exporter, opset=_opset, dtype=_dtype)
            FIXTURES[f"{_stem}_decode.{_tag}.{_suffix}"] = functools.partial(
                _export_decode, stem=f"{_stem}_decode", exporter=_exporter, opset=_opset,
                dtype=_dtype)
