"""Encoder-decoder fixtures of the held-out set: one decoder step of Whisper and of BART from
transformers, tiny random configs built from their config classes (no hub downloads).

Each step takes one new decoder token, the encoder's hidden states (another length than the
decoder's) and the self-attention keys/values of a few cached tokens, and returns the step's
output and the present self-attention keys/values: per layer a self-attention block over past +
1 keys and a cross-attention block over the encoder states (4 blocks in 2 layers). The cross-
attention cache starts empty, so its keys and values are projected from encoder_hidden_states
inside the step. BART also takes the encoder's padding mask (row 0 padded at the export); Whisper's
decoder has none. Exported by the TorchScript exporter (opset 17) and the dynamo exporter
(opset 18), fp32, "sdpa", dynamic batch, past length and encoder length.
"""
from __future__ import annotations

import contextlib

import torch
import transformers
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

import common
import decoders

BATCH = 2
PAST = 5          # cached decoder tokens at the export
ENCODER = 12      # encoder states at the export
RECHECK = (3, 3, 9)  # batch, cached tokens, encoder states of the second check
VOCAB = 64
LAYERS = 2
HIDDEN = 32       # 4 heads of 8
HEADS = 4
FFN = 64
INIT_STD = 0.2    # as the decoder fixtures: attention scores spread over a few units


class DecoderStep(torch.nn.Module):
    """input_ids [B, 1], encoder_hidden_states [B, enc, hidden], (encoder_attention_mask
    [B, enc] where `encoder_mask`,) past self-attention keys/values flat (key 0, value 0, key 1,
    ...) each [B, heads, past, head_dim] -> output (`head` of the last hidden state where given),
    present self-attention keys/values flat."""

    def __init__(self, decoder: torch.nn.Module, head: torch.nn.Module | None = None,
                 encoder_mask: bool = False):
        super().__init__()
        self.decoder, self.head, self.encoder_mask = decoder, head, encoder_mask

    def forward(self, input_ids, encoder_hidden_states, *rest):
        # One batch for the decoder and the encoder states, said so for torch.export: with
        # Dim.AUTO their batches are two symbols, and BART's view(batch, -1, heads, head size) of
        # the cross-attention keys then leaves the heads axis a quotient of them. (The
        # TorchScript tracer's shapes are tensors, which torch._check refuses.)
        if not torch.jit.is_tracing():
            torch._check(encoder_hidden_states.shape[0] == input_ids.shape[0])
        extra = {}
        if self.encoder_mask:
            extra["encoder_attention_mask"], rest = rest[0], rest[1:]
        if decoders.legacy_only(self.decoder):
            # transformers 4.49's BART takes only legacy tuples, (self key, self value, cross
            # key, cross value) a layer; empty cross pairs ([B, heads, 0, head_dim]: not the
            # encoder's length) make each layer project the encoder states, as the empty
            # cross-attention cache does.
            cache = tuple((k, v, k[:, :, :0], v[:, :, :0])
                          for k, v in decoders.cache_of(rest, self.decoder))
        else:
            cache = EncoderDecoderCache(decoders.cache_of(rest), DynamicCache())
        out = self.decoder(input_ids=input_ids, encoder_hidden_states=encoder_hidden_states,
                           use_cache=True, return_dict=True, **extra,
                           **decoders.cache_keyword(self.decoder, cache))
        hidden = out.last_hidden_state
        present = decoders.cache_returned(out)  # cache_tensors: its self-attention part
        return (self.head(hidden) if self.head is not None else hidden,
                *decoders.cache_tensors(present))


def _whisper():
    config = transformers.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=16, d_model=HIDDEN, encoder_layers=1,
        decoder_layers=LAYERS, encoder_attention_heads=HEADS, decoder_attention_heads=HEADS,
        encoder_ffn_dim=FFN, decoder_ffn_dim=FFN, max_source_positions=16,
        max_target_positions=32, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        init_std=INIT_STD, pad_token_id=1, bos_token_id=2, eos_token_id=2,
        decoder_start_token_id=3, suppress_tokens=None, begin_suppress_tokens=None)
    model = transformers.WhisperForConditionalGeneration._from_config(
        config, attn_implementation="sdpa")
    return (DecoderStep(model.model.decoder, head=model.proj_out), "logits",
            "WhisperForConditionalGeneration: model.model.decoder, then proj_out (logits); no "
            "decoder or encoder mask")


def _bart():
    config = transformers.BartConfig(
        vocab_size=VOCAB, d_model=HIDDEN, encoder_layers=1, decoder_layers=LAYERS,
        encoder_attention_heads=HEADS, decoder_attention_heads=HEADS, encoder_ffn_dim=FFN,
        decoder_ffn_dim=FFN, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, init_std=INIT_STD)
    model = transformers.BartModel._from_config(config, attn_implementation="sdpa")
    return (DecoderStep(model.get_decoder(), encoder_mask=True), "last_hidden_state",
            "BartModel.get_decoder() (BartDecoder), encoder_attention_mask for padded encoder "
            "rows")


FAMILIES = {"whisper_decode": _whisper, "bart_decode": _bart}


def _inputs(batch: int, past: int, encoder: int, encoder_mask: bool):
    ids = torch.randint(3, VOCAB, (batch, 1), dtype=torch.int64)
    states = torch.randn(batch, encoder, HIDDEN)
    mask = ()
    if encoder_mask:
        mask = torch.ones(batch, encoder, dtype=torch.int64)
        mask[0, -max(1, encoder // 4):] = 0  # row 0's encoder states right-padded
        mask = (mask,)
    kv = (torch.randn(batch, HEADS, past, HIDDEN // HEADS) for _ in range(2 * LAYERS))
    return (ids, states, *mask, *kv)


def _export(name: str, *, family: str, exporter: str, opset: int) -> dict:
    common.seeded()
    step, output, what = FAMILIES[family]()
    step = step.eval()
    common.redraw_zero_parameters(step, std=INIT_STD)
    args = _inputs(BATCH, PAST, ENCODER, step.encoder_mask)
    common.seeded(1)
    recheck = _inputs(*RECHECK, step.encoder_mask)
    past_names = [f"past_key_values.{i // 2}.decoder.{'value' if i % 2 else 'key'}"
                  for i in range(2 * LAYERS)]
    present_names = [p.replace("past_key_values", "present") for p in past_names]
    mask_names = ["encoder_attention_mask"] if step.encoder_mask else []
    input_names = ["input_ids", "encoder_hidden_states", *mask_names, *past_names]
    dynamic = {"input_ids": {0: "batch"},
               "encoder_hidden_states": {0: "batch", 1: "encoder_sequence"},
               **{n: {0: "batch", 1: "encoder_sequence"} for n in mask_names},
               output: {0: "batch"},
               **{n: {0: "batch", 2: "past_sequence"} for n in past_names},
               **{n: {0: "batch", 2: "total_sequence"} for n in present_names}}
    fills = {"input_ids": {"int": [3, VOCAB]}, "encoder_hidden_states": {"normal": 1.0},
             **{n: {"ones": True} for n in mask_names},
             **{n: {"normal": 1.0} for n in past_names}}
    with decoders.masks_without_vmap() if exporter == "torchscript" else contextlib.nullcontext():
        return common.export(
            step, args, name, family=family.removesuffix("_decode"), exporter=exporter,
            opset=opset, dtype="float32", blocks=2 * LAYERS, input_names=input_names,
            output_names=[output, *present_names], dynamic=dynamic, fills=fills,
            recheck=recheck,
            note=f"transformers {what}; hidden {HIDDEN}, {HEADS} heads of {HIDDEN // HEADS}, "
                 f"{LAYERS} decoder layers (self-attention over past + 1 keys through the "
                 f"release's DynamicCache, cross-attention over the encoder states projected in "
                 f"the step: {2 * LAYERS} blocks); one decoder step: input_ids [batch, 1], "
                 f"encoder_hidden_states [batch, encoder, {HIDDEN}]; batch, past and encoder "
                 f"lengths dynamic ({'row 0 encoder-padded, ' if mask_names else ''}batch "
                 f"{BATCH}, {PAST} cached tokens, {ENCODER} encoder states at the export)")


FIXTURES = common.fp32_matrix(FAMILIES, _export, "family")
