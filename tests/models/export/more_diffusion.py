"""More diffusion-transformer fixtures, from their libraries' own classes with tiny random configs:
DiT (class-conditioned), PixArt-α (self-attention and masked cross-attention to text), HunyuanDiT
(self and cross attention, q/k LayerNorm, 2D RoPE, an attention pool over the T5 states),
CogVideoX (joint text + video attention), AuraFlow (joint and single-stream blocks, register
tokens), SD3.5 Medium's dual attention (MMDiT-X), and F5-TTS's other backbones, MMDiT (joint audio
+ text attention) and UNetT (a flat U-Net of self-attention layers with a skip connection).

Each is exported by the TorchScript exporter (opset 17) and the dynamo exporter (opset 18), fp32,
static shapes, as diffusion.py's families; DiT in bfloat16 as well (dit.TAG.bf16: the module in
bfloat16, hidden_states bfloat16).
"""
from __future__ import annotations

import functools

import torch
from torch import nn

import common
import diffusion
from diffusion import BATCH, STATIC

LATENT = 8         # 8x8 latent, patch 2: 16 image tokens
TEXT = 6           # text tokens
TEXT_DIM = 16      # text encoder width
LAYERS = 2


def _timesteps(dtype: torch.dtype, integer: bool) -> torch.Tensor:
    """Timesteps as the family's pipeline hands them: the long scheduler steps of the DDPM-style
    schedulers (DiT, PixArt, CogVideoX), the model's float dtype where the pipeline casts them
    (HunyuanDiT feeds its timestep dtype to the embedding's Linear)."""
    if integer:
        return torch.randint(0, 1000, (BATCH,), dtype=torch.int64)
    return (torch.rand(BATCH) * 1000).to(dtype)


def _padded_mask(length: int) -> torch.Tensor:
    """A tokenizer's attention mask: row 0 right-padded, as the shorter prompt of a batch is."""
    mask = torch.ones(BATCH, length, dtype=torch.int64)
    mask[0, -2:] = 0
    return mask


# ---------------------------------------------------------------- DiT

DIT_CLASSES = 10


class _DiT(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, timestep, class_labels):
        return self.model(hidden_states=hidden_states, timestep=timestep,
                          class_labels=class_labels, return_dict=False)[0]


def _dit(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.DiTTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, num_layers=LAYERS,
        sample_size=LATENT, patch_size=2, num_embeds_ada_norm=DIT_CLASSES)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    module = _DiT(model).to(dtype)
    args = (torch.randn(BATCH, 4, LATENT, LATENT, dtype=dtype), _timesteps(dtype, True),
            torch.randint(0, DIT_CLASSES, (BATCH,), dtype=torch.int64))
    fills = {"timestep": {"int": [0, 1000]}, "class_labels": {"int": [0, DIT_CLASSES]}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "timestep", "class_labels"],
                output_names=["sample"], fills=fills, blocks=LAYERS,
                note=f"diffusers DiTTransformer2DModel, 2 heads of 16, {LAYERS} blocks "
                     f"(ada_norm_zero, self-attention only), {DIT_CLASSES} classes; "
                     f"{LATENT}x{LATENT} latent, patch 2 (16 image tokens), batch {BATCH}; "
                     f"{STATIC}")


# ---------------------------------------------------------------- PixArt-α

class _PixArt(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, encoder_hidden_states, timestep, encoder_attention_mask):
        return self.model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                          timestep=timestep, added_cond_kwargs={},
                          encoder_attention_mask=encoder_attention_mask, return_dict=False)[0]


def _pixart(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.PixArtTransformer2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
        num_layers=LAYERS, cross_attention_dim=32, sample_size=LATENT, patch_size=2,
        caption_channels=TEXT_DIM)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    module = _PixArt(model).to(dtype)
    args = (torch.randn(BATCH, 4, LATENT, LATENT, dtype=dtype),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), _timesteps(dtype, True),
            _padded_mask(TEXT))
    fills = {"timestep": {"int": [0, 1000]}, "encoder_attention_mask": {"ones": True}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "timestep",
                             "encoder_attention_mask"],
                output_names=["sample"], fills=fills, blocks=2 * LAYERS,
                note=f"diffusers PixArtTransformer2DModel (PixArt-α, ada_norm_single), 2 heads of "
                     f"16, {LAYERS} blocks of self-attention + cross-attention to {TEXT} text "
                     f"tokens under an encoder_attention_mask (row 0's last 2 padded at the "
                     f"export; the model turns it into a -10000 bias); {LATENT}x{LATENT} latent, "
                     f"patch 2 (16 image tokens), batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- HunyuanDiT

HUNYUAN_T5 = 8     # T5 tokens (the attention pool's length), beside TEXT CLIP-side tokens


class _Hunyuan(nn.Module):
    """The 2D RoPE table is fixed for the 4x4 patch grid (buffers, not inputs), as the pipeline
    computes it once per image size with get_2d_rotary_pos_embed."""

    def __init__(self, model, cos, sin):
        super().__init__()
        self.model = model
        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)

    def forward(self, hidden_states, timestep, encoder_hidden_states, text_embedding_mask,
                encoder_hidden_states_t5, text_embedding_mask_t5):
        return self.model(hidden_states, timestep, encoder_hidden_states=encoder_hidden_states,
                          text_embedding_mask=text_embedding_mask,
                          encoder_hidden_states_t5=encoder_hidden_states_t5,
                          text_embedding_mask_t5=text_embedding_mask_t5,
                          image_rotary_emb=(self.rope_cos, self.rope_sin), return_dict=False)[0]


def _hunyuan(dtype: torch.dtype, exporter: str):
    import diffusers
    from diffusers.models.embeddings import get_2d_rotary_pos_embed
    # HunyuanDiT v1.2's configuration (no style or image-size conditions): with them the extra
    # embedder takes 6 x 256 sinusoids plus the style, a Linear larger than the whole model.
    model = diffusers.HunyuanDiT2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, patch_size=2,
        sample_size=LATENT, hidden_size=32, num_layers=LAYERS, mlp_ratio=2.0,
        cross_attention_dim=TEXT_DIM, cross_attention_dim_t5=TEXT_DIM,
        pooled_projection_dim=TEXT_DIM, text_len=TEXT, text_len_t5=HUNYUAN_T5,
        use_style_cond_and_image_meta_size=False)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 2.0)
    grid = LATENT // 2
    # The pipeline's crop region of a grid at its own base size: the whole grid. output_type as
    # the pipeline passes it: diffusers 0.33 to 0.39 default to "np", whose deprecation raises.
    cos, sin = get_2d_rotary_pos_embed(16, ((0, 0), (grid, grid)), (grid, grid), use_real=True,
                                       output_type="pt")
    module = _Hunyuan(model, cos.float(), sin.float()).to(dtype)
    args = (torch.randn(BATCH, 4, LATENT, LATENT, dtype=dtype), _timesteps(dtype, False),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), _padded_mask(TEXT),
            torch.randn(BATCH, HUNYUAN_T5, TEXT_DIM, dtype=dtype), _padded_mask(HUNYUAN_T5))
    fills = {"timestep": {"normal": 500.0}, "text_embedding_mask": {"ones": True},
             "text_embedding_mask_t5": {"ones": True}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "timestep", "encoder_hidden_states",
                             "text_embedding_mask", "encoder_hidden_states_t5",
                             "text_embedding_mask_t5"],
                output_names=["sample"], fills=fills, blocks=2 * LAYERS + 1,
                note=f"diffusers HunyuanDiT2DModel (v1.2 form: no style or image-size "
                     f"conditions), 2 heads of 16, {LAYERS} blocks of self-attention (2D RoPE, "
                     f"q/k LayerNorm) + cross-attention (q/k LayerNorm, RoPE on q only) to "
                     f"{TEXT} + {HUNYUAN_T5} text tokens, and the timestep embedding's attention "
                     f"pool over the T5 states (8 heads of 2, one query); text masks replace "
                     f"padded states by a learned padding (row 0's last 2 padded at the export); "
                     f"{LATENT}x{LATENT} latent, patch 2 (16 image tokens), RoPE table fixed "
                     f"(buffers, not inputs), batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- CogVideoX

COG_FRAMES = 2     # latent frames (5 video frames, temporal compression 4)


class _TextConditioned(nn.Module):
    """A transformer called on latents, text states and a timestep (CogVideoX, AuraFlow)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, hidden_states, encoder_hidden_states, timestep):
        return self.model(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                          timestep=timestep, return_dict=False)[0]


def _cogvideox(dtype: torch.dtype, exporter: str):
    import diffusers
    # CogVideoX-2b's form (sinusoidal 3D positions added to the patches, no RoPE); its text length
    # is the configured max_text_seq_length, which the positional table is laid out for.
    model = diffusers.CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4,
        time_embed_dim=32, text_embed_dim=TEXT_DIM, num_layers=LAYERS, sample_width=LATENT,
        sample_height=LATENT, sample_frames=(COG_FRAMES - 1) * 4 + 1, patch_size=2,
        temporal_compression_ratio=4, max_text_seq_length=TEXT)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 2.0)
    module = _TextConditioned(model).to(dtype)
    args = (torch.randn(BATCH, COG_FRAMES, 4, LATENT, LATENT, dtype=dtype),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), _timesteps(dtype, True))
    fills = {"timestep": {"int": [0, 1000]}}
    video = COG_FRAMES * (LATENT // 2) ** 2
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "timestep"],
                output_names=["sample"], fills=fills, blocks=LAYERS,
                note=f"diffusers CogVideoXTransformer3DModel (CogVideoX-2b form: sinusoidal 3D "
                     f"positions, no RoPE), 2 heads of 16, {LAYERS} blocks of joint text + video "
                     f"attention (q/k LayerNorm); {COG_FRAMES} latent frames of "
                     f"{LATENT}x{LATENT}, patch 2 ({video} video tokens) + {TEXT} text tokens, "
                     f"batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- AuraFlow

def _auraflow(dtype: torch.dtype, exporter: str):
    import diffusers
    model = diffusers.AuraFlowTransformer2DModel(
        sample_size=LATENT, patch_size=2, in_channels=4, num_mmdit_layers=1,
        num_single_dit_layers=1, attention_head_dim=16, num_attention_heads=2,
        joint_attention_dim=TEXT_DIM, caption_projection_dim=32, out_channels=4,
        pos_embed_max_size=(LATENT // 2) ** 2)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    module = _TextConditioned(model).to(dtype)
    # The pipeline's flow-matching timesteps, divided by 1000 (the embedding scales them back).
    args = (torch.randn(BATCH, 4, LATENT, LATENT, dtype=dtype),
            torch.randn(BATCH, TEXT, TEXT_DIM, dtype=dtype), torch.rand(BATCH, dtype=dtype))
    fills = {"timestep": {"normal": 0.5}}
    return dict(module=module, args=args,
                input_names=["hidden_states", "encoder_hidden_states", "timestep"],
                output_names=["sample"], fills=fills, blocks=2,
                note=f"diffusers AuraFlowTransformer2DModel, 2 heads of 16, 1 joint (MMDiT) + "
                     f"1 single-stream block; 16 image tokens (8x8 latent, patch 2) + 8 register "
                     f"+ {TEXT} text tokens, batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- F5-TTS MMDiT and UNetT

F5_SEQ, F5_TEXT, F5_MEL, F5_VOCAB = (diffusion.F5_SEQ, diffusion.F5_TEXT, diffusion.F5_MEL,
                                     diffusion.F5_VOCAB)


def _f5_inputs(dtype: torch.dtype):
    return (torch.randn(BATCH, F5_SEQ, F5_MEL, dtype=dtype),
            torch.randn(BATCH, F5_SEQ, F5_MEL, dtype=dtype),
            torch.randint(0, F5_VOCAB, (BATCH, F5_TEXT)),
            torch.rand(BATCH, dtype=dtype))


F5_FILLS = {"text": {"int": [0, F5_VOCAB]}, "time": {"normal": 0.5}}


def _f5_mmdit(dtype: torch.dtype, exporter: str):
    MMDiT = diffusion._f5_backbone("mmdit", "MMDiT")
    model = MMDiT(dim=32, depth=LAYERS, heads=2, dim_head=16, dropout=0.0, ff_mult=2,
                  mel_dim=F5_MEL, text_num_embeds=F5_VOCAB)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    # Sinusoids for 1024 text positions, of which a fixture reads the first F5_TEXT.
    model.text_embed.freqs_cis = model.text_embed.freqs_cis[:F5_TEXT].clone()
    module = diffusion._F5(model).to(dtype)
    return dict(module=module, args=_f5_inputs(dtype), input_names=["x", "cond", "text", "time"],
                output_names=["pred"], fills=F5_FILLS, blocks=LAYERS,
                note=f"F5-TTS MMDiT dim 32, 2 heads of 16, {LAYERS} blocks of joint audio + text "
                     f"attention (RoPE on each stream, the last context_pre_only); {F5_SEQ} mel "
                     f"frames + {F5_TEXT} text tokens, batch {BATCH}; {STATIC}")


def _f5_unett(dtype: torch.dtype, exporter: str):
    UNetT = diffusion._f5_backbone("unett", "UNetT")
    model = UNetT(dim=32, depth=LAYERS, heads=2, dim_head=16, dropout=0.0, ff_mult=2,
                  mel_dim=F5_MEL, text_num_embeds=F5_VOCAB, text_dim=16)
    common.redraw_zero_parameters(model)
    diffusion._sharpen(model, 3.0)
    model.text_embed = diffusion._IntSeqLen(model.text_embed)
    module = diffusion._F5(model).to(dtype)
    return dict(module=module, args=_f5_inputs(dtype), input_names=["x", "cond", "text", "time"],
                output_names=["pred"], fills=F5_FILLS, blocks=LAYERS,
                note=f"F5-TTS UNetT (E2-TTS backbone) dim 32, 2 heads of 16, {LAYERS} "
                     f"self-attention layers with a concat skip from the first to the second, "
                     f"the time embedding packed as a first token, RoPE; text embedded without "
                     f"ConvNeXt layers, padded to the {F5_SEQ} mel frames ({F5_TEXT} text "
                     f"tokens), batch {BATCH}; {STATIC}")


# ---------------------------------------------------------------- the fixture table

FAMILIES = {
    "dit": ("dit", _dit),
    "pixart": ("pixart", _pixart),
    "hunyuan_dit": ("hunyuan_dit", _hunyuan),
    "cogvideox": ("cogvideox", _cogvideox),
    "auraflow": ("auraflow", _auraflow),
    "sd35_dual": ("sd3", functools.partial(diffusion._sd3, qk_norm="rms_norm",
                                           dual_attention_layers=(0,))),
    "f5tts_mmdit": ("f5tts", _f5_mmdit),
    "f5tts_unett": ("f5tts", _f5_unett),
}


FIXTURES = diffusion.family_fixtures(FAMILIES)


# bfloat16 DiT: ONNX Runtime's CPU provider has no bfloat16 kernels, so the export check and the
# conformance suite run it in the ONNX reference evaluator.
for _tag, (_exporter, _opset) in common.HELDOUT_EXPORTERS.items():
    FIXTURES[f"dit.{_tag}.bf16"] = functools.partial(
        diffusion._fixture, _dit, "dit", _exporter, _opset, "bfloat16", torch.bfloat16)
