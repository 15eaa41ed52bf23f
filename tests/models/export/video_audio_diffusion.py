"""Video and audio diffusion-transformer fixtures, from diffusers' own classes with tiny random
configs (those of diffusers' unit tests, widened to 2 heads of 16 where they are narrower):
HunyuanVideo 1.5 (a token refiner's masked self-attention over the text, then dual-stream joint
video + text attention under a mask built from the text masks, after a per-sample boolean-index
reordering of the valid text tokens first), Helios (self-attention with 3D RoPE over the video
and its short, mid and long history latents, cross-attention of the current frames alone to the
text), Mochi (joint video + text attention computed sample by sample over the valid text tokens
that torch.nonzero picks, and an attention pool over the text as the timestep embedding's
caption term) and Stable Audio (self-attention with partial RoPE, cross-attention with grouped
key/value heads).

Each is exported by the TorchScript exporter (opset 17) and the dynamo exporter (opset 18), fp32,
static shapes, as more_diffusion.py's families. Text masks are passed where the pipeline passes
them (HunyuanVideo 1.5, Mochi), row 0 right-padded at the export.
"""
from __future__ import annotations

import torch
from torch import nn

import common
import diffusion
from diffusion import BATCH, STATIC
from more_diffusion import _padded_mask

LATENT = 8         # 8x8 latent
TEXT = 6           # text tokens
TEXT_DIM = 16      # text encoder width
LAYERS = 2


# ---------------------------------------------------------------- HunyuanVideo 1.5

HY15_FRAMES, HY15_LATENT = 2, 4   # 2 latent frames of 4x4, patch 1: 32 video tokens
HY15_BYT5 = 4                     # ByT5 (glyph) tokens
HY15_IMAGE = 3                    # vision tokens (all zeros for text-to-video)
HY15_REFINER = 1                  # token refiner layers


class _HunyuanVideo15(nn.Module):
    """Text-to-video as HunyuanVideo15Pipeline calls it: the latents concatenated with the
    condition latents and their mask (2 x 4 + 1 channels), the vision states all zeros (a
    buffer: the model tests them for zero, which the export fixes to the text-to-video path)."""

    def __init__(self, model, image_embeds):
        super().__init__()
        self.model = model
        self.register_buffer("image_embeds", image_embeds)

    def forward(self, hidden_states, timestep, encoder_hidden_states, encoder_attention_mask,
                encoder_hidden_states_2, encoder_attention_mask_2):
        return self.model(hidden_states=hidden_states, timestep=timestep,
                          encoder_hidden_states=encoder_hidden_states,
                          encoder_attention_mask=encoder_attention_mask,
                          encoder_hidden_states_2=encoder_hidden_states_2,
                          encoder_attention_mask_2=encoder_attention_mask_2,
                          image_embeds=self.image_embeds, return_dict=False)[0]


def _hunyuan_video15(dtype: torch.dtype, exporter: str):
    import diffusers
    from diffusers.models.transformers.transformer_hunyuan_video15 import (
        HunyuanVideo15ByT5TextProjection)
    model = diffusers.HunyuanVideo15Transformer3DModel(
        in_channels=2 * 4 + 1, out_channels=4, num_attention_heads=2, attention_head_dim=16,
        num_layers=LAYERS, num_refiner_layers=HY15_REFINER, mlp_ratio=2.0, patch_size=1,
        patch_size_t=1, text_embed_dim=TEXT_DIM, text_embed_2_dim=8, image_embed_dim=TEXT_DIM,
        rope_axes_dim=(4, 6, 6), target_size=16, task_type="t2v")
    # The ByT5 projection's hidden width is fixed at 2048 (a 2048x2048 Linear, 16 MB): the same
    # class at width 32, which no attention reads differently.
    model.context_embedder_2 = HunyuanVideo15ByT5TextProjection(8, 32, 32)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 2.0)
    module = _HunyuanVideo15(model, torch.zeros(BATCH, HY15_IMAGE, TEXT_DIM)).to(dtype)
    # The pipeline casts the masks and the timestep to the transformer's dtype.
    args = (torch.randn(BATCH, 2 * 4 + 1, HY15_FRAMES, HY15_LATENT, HY15_LATENT, dtype=dtype),
            (torch.rand(BATCH) * 1000).to(dtype),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), _padded_mask(TEXT).to(dtype),
            torch.randn(BATCH, HY15_BYT5, 8, dtype=dtype), _padded_mask(HY15_BYT5).to(dtype))
    fills = {"timestep": {"normal": 500.0}, "encoder_attention_mask": {"ones": True},
             "encoder_attention_mask_2": {"ones": True}}
    video = HY15_FRAMES * HY15_LATENT ** 2
    return dict(module=module, args=args,
                input_names=["hidden_states", "timestep", "encoder_hidden_states",
                             "encoder_attention_mask", "encoder_hidden_states_2",
                             "encoder_attention_mask_2"],
                output_names=["sample"], fills=fills, blocks=HY15_REFINER + LAYERS,
                note=f"diffusers HunyuanVideo15Transformer3DModel (text-to-video), 2 heads of 16: "
                     f"{HY15_REFINER} token-refiner block of masked self-attention over {TEXT} "
                     f"text tokens, {LAYERS} dual-stream blocks of joint video + text attention "
                     f"(q/k RMSNorm, 3D RoPE on the video) under a pairwise mask of the "
                     f"{HY15_IMAGE} vision + {HY15_BYT5} ByT5 + {TEXT} text tokens, reordered "
                     f"valid-first per sample by boolean indexing (row 0's last 2 of each text "
                     f"mask padded at the export); {HY15_FRAMES} latent frames of "
                     f"{HY15_LATENT}x{HY15_LATENT}, patch 1 ({video} video tokens), ByT5 "
                     f"projection width 32, batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- Helios

# Frames of each history as HeliosPipeline splits them (its default is 16, 2 and 1 + a prefix
# frame): long 4, mid 2, short 2 (prefix + 1), then the chunk's own 2 frames.
HELIOS_LONG, HELIOS_MID, HELIOS_SHORT, HELIOS_FRAMES = 4, 2, 2, 2
HELIOS_TEXT = 8


class _Helios(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, timestep, encoder_hidden_states, indices_hidden_states,
                indices_latents_history_short, indices_latents_history_mid,
                indices_latents_history_long, latents_history_short, latents_history_mid,
                latents_history_long):
        return self.model(hidden_states=hidden_states, timestep=timestep,
                          encoder_hidden_states=encoder_hidden_states,
                          indices_hidden_states=indices_hidden_states,
                          indices_latents_history_short=indices_latents_history_short,
                          indices_latents_history_mid=indices_latents_history_mid,
                          indices_latents_history_long=indices_latents_history_long,
                          latents_history_short=latents_history_short,
                          latents_history_mid=latents_history_mid,
                          latents_history_long=latents_history_long, return_dict=False)[0]


def _helios(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.HeliosTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
        out_channels=4, text_dim=TEXT_DIM, freq_dim=256, ffn_dim=64, num_layers=LAYERS,
        cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_dim=(4, 6, 6),
        has_multi_term_memory_patch=True, guidance_cross_attn=True, zero_history_timestep=True,
        is_amplify_history=False)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 2.0)
    swapped = ""
    if exporter == "torchscript":
        diffusion._diffusers_rms_norms(model)
        swapped = ("; q/k norms torch.nn.RMSNorm → diffusers RMSNorm (no aten::rms_norm "
                   "symbolic at opset 17)")
    module = _Helios(model).to(dtype)
    # The pipeline's frame indices: one row (unsqueeze(0)) of arange split into the histories.
    indices = torch.arange(0, 1 + HELIOS_LONG + HELIOS_MID + (HELIOS_SHORT - 1) + HELIOS_FRAMES)
    prefix, long, mid, short_1x, current = indices.split(
        [1, HELIOS_LONG, HELIOS_MID, HELIOS_SHORT - 1, HELIOS_FRAMES])
    short = torch.cat([prefix, short_1x])

    def latents(frames):
        return torch.randn(BATCH, 4, frames, LATENT, LATENT, dtype=dtype)

    args = (latents(HELIOS_FRAMES), (torch.rand(BATCH) * 1000).to(dtype),
            torch.randn(BATCH, HELIOS_TEXT, TEXT_DIM, dtype=dtype),
            current[None], short[None], mid[None], long[None],
            latents(HELIOS_SHORT), latents(HELIOS_MID), latents(HELIOS_LONG))
    top = int(indices.max()) + 1
    fills = {"timestep": {"normal": 500.0},
             **{n: {"int": [0, top]} for n in (
                 "indices_hidden_states", "indices_latents_history_short",
                 "indices_latents_history_mid", "indices_latents_history_long")}}
    grid = (LATENT // 2) ** 2
    tokens = (HELIOS_FRAMES * grid, HELIOS_SHORT * grid, grid // 4, grid // 16)
    return dict(module=module, args=args,
                input_names=["hidden_states", "timestep", "encoder_hidden_states",
                             "indices_hidden_states", "indices_latents_history_short",
                             "indices_latents_history_mid", "indices_latents_history_long",
                             "latents_history_short", "latents_history_mid",
                             "latents_history_long"],
                output_names=["sample"], fills=fills, blocks=2 * LAYERS,
                note=f"diffusers HeliosTransformer3DModel, 2 heads of 16, {LAYERS} blocks of "
                     f"self-attention (q/k RMSNorm across heads, 3D RoPE from frame-index "
                     f"inputs) over the chunk's {tokens[0]} video tokens and its short, mid and "
                     f"long history latents ({tokens[1]} + {tokens[2]} + {tokens[3]} tokens, "
                     f"patches 1x2x2, 2x4x4, 4x8x8) + cross-attention of the chunk's tokens "
                     f"alone to {HELIOS_TEXT} text tokens; {HELIOS_FRAMES} latent frames of "
                     f"{LATENT}x{LATENT}, batch {BATCH}; {STATIC}{swapped}")


# ---------------------------------------------------------------- Mochi

MOCHI_FRAMES = 2


class _Mochi(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, encoder_hidden_states, timestep, encoder_attention_mask):
        return self.model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                          timestep=timestep, encoder_attention_mask=encoder_attention_mask,
                          return_dict=False)[0]


def _mochi(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.MochiTransformer3DModel(
        patch_size=2, num_attention_heads=2, attention_head_dim=16, num_layers=LAYERS,
        pooled_projection_dim=16, in_channels=4, out_channels=None, qk_norm="rms_norm",
        text_embed_dim=TEXT_DIM, time_embed_dim=16, activation_fn="swiglu",
        max_sequence_length=TEXT)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 2.0)
    module = _Mochi(model).to(dtype)
    # MochiPipeline: the T5 mask as bool, the timestep (1000 - t) in the latents' dtype.
    args = (torch.randn(BATCH, 4, MOCHI_FRAMES, LATENT, LATENT, dtype=dtype),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), (torch.rand(BATCH) * 1000).to(dtype),
            _padded_mask(TEXT).bool())
    fills = {"timestep": {"normal": 500.0}, "encoder_attention_mask": {"ones": True}}
    video = MOCHI_FRAMES * (LATENT // 2) ** 2
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "timestep",
                             "encoder_attention_mask"],
                output_names=["sample"], fills=fills, blocks=LAYERS * BATCH + 1,
                note=f"diffusers MochiTransformer3DModel, 2 heads of 16, {LAYERS} blocks of joint "
                     f"video + text attention (q/k RMSNorm, 3D RoPE on the video, the last "
                     f"context_pre_only), each computed sample by sample ({BATCH} attentions a "
                     f"block) over the text tokens torch.nonzero finds valid in "
                     f"encoder_attention_mask, and the caption embedding's attention pool (8 heads "
                     f"of 2, one query, masked); {MOCHI_FRAMES} latent frames of "
                     f"{LATENT}x{LATENT}, patch 2 ({video} video tokens) + {TEXT} text tokens "
                     f"(row 0's last 2 padded at the export), batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- Stable Audio

AUDIO_SEQ = 16        # latent audio frames
AUDIO_CHANNELS = 8    # latent channels
AUDIO_HEADS, AUDIO_KV_HEADS, AUDIO_HEAD_DIM = 4, 2, 8


class _StableAudio(nn.Module):
    """StableAudioPipeline's call: no masks (it zeroes the padded text states instead), the
    1D RoPE table of the global token + audio frames fixed (buffers, not inputs), as the
    pipeline computes it once per audio length with get_1d_rotary_pos_embed."""

    def __init__(self, model, cos, sin):
        super().__init__()
        self.model = model
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)

    def forward(self, hidden_states, timestep, encoder_hidden_states, global_hidden_states):
        return self.model(hidden_states, timestep, encoder_hidden_states=encoder_hidden_states,
                          global_hidden_states=global_hidden_states,
                          rotary_embedding=(self.rope_cos, self.rope_sin), return_dict=False)[0]


def _stable_audio(dtype: torch.dtype, exporter: str):
    import diffusers
    from diffusers.models.embeddings import get_1d_rotary_pos_embed
    # Stable Audio Open's form (24 query heads, 12 key/value heads in the cross-attention) at
    # 4 query heads of 8 and 2 key/value heads.
    model = diffusers.StableAudioDiTModel(
        sample_size=AUDIO_SEQ, in_channels=AUDIO_CHANNELS, num_layers=LAYERS,
        attention_head_dim=AUDIO_HEAD_DIM, num_attention_heads=AUDIO_HEADS,
        num_key_value_attention_heads=AUDIO_KV_HEADS, out_channels=AUDIO_CHANNELS,
        cross_attention_dim=32, time_proj_dim=16, global_states_input_dim=TEXT_DIM,
        cross_attention_input_dim=TEXT_DIM)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    cos, sin = get_1d_rotary_pos_embed(AUDIO_HEAD_DIM // 2, AUDIO_SEQ + 1, use_real=True,
                                       repeat_interleave_real=False)
    module = _StableAudio(model, cos.float(), sin.float()).to(dtype)
    # The pipeline's timestep is t.unsqueeze(0) (one for the batch), the scheduler's
    # preconditioned noise level in [0, 1); the text states are the T5 states + the seconds
    # start and end embeddings, the global state the two seconds embeddings.
    args = (torch.randn(BATCH, AUDIO_CHANNELS, AUDIO_SEQ, dtype=dtype),
            torch.rand(1, dtype=dtype),
            torch.randn(BATCH, TEXT + 2, TEXT_DIM, dtype=dtype),
            torch.randn(BATCH, 1, TEXT_DIM, dtype=dtype))
    fills = {"timestep": {"normal": 0.5}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "timestep", "encoder_hidden_states",
                             "global_hidden_states"],
                output_names=["sample"], fills=fills, blocks=2 * LAYERS,
                note=f"diffusers StableAudioDiTModel, {AUDIO_HEADS} heads of {AUDIO_HEAD_DIM}, "
                     f"{LAYERS} blocks of self-attention (RoPE on the first half of each head) "
                     f"over a global token + {AUDIO_SEQ} latent audio frames + cross-attention "
                     f"with {AUDIO_KV_HEADS} key/value heads (repeat_interleave to "
                     f"{AUDIO_HEADS}) to {TEXT} text + 2 seconds tokens; no masks (as the "
                     f"pipeline calls it), RoPE table fixed (buffers, not inputs), batch {BATCH}; "
                     f"{STATIC}")


# ---------------------------------------------------------------- the fixture table

FAMILIES = {
    "hunyuan_video15": ("hunyuan_video15", _hunyuan_video15),
    "helios": ("helios", _helios),
    "mochi": ("mochi", _mochi),
    "stable_audio": ("stable_audio", _stable_audio),
}


FIXTURES = diffusion.family_fixtures(FAMILIES)
