"""Qwen2.5-VL (Qwen/Qwen2.5-VL-3B, -7B, -32B, -72B Instruct; transformers' ``qwen2_5_vl``) and
Qwen2-VL (Qwen/Qwen2-VL-2B, -7B, -72B Instruct; ``qwen2_vl``), its predecessor: the same layout
(one run of ``T * P`` video tokens per video, MRoPE, the same processor values and chat template)
with an older ViT and relative time.

What differs between the two archs is declared once here (:data:`ARCHS`, by ``model_type``) and
read by the modules: :mod:`.adapter` (the pruning hooks' view of the model: one run of video
tokens per video, a windowed ViT or not, absolute time or not), :mod:`.plugin` (lmms-eval's
``vcast_qwen2_5_vl``, for both), :mod:`.tiny` (tiny checkpoints), :mod:`.flops` (the ViT's FLOPs),
:mod:`.real_size` (the published configs the GPU kit builds).
"""

from __future__ import annotations

from dataclasses import dataclass

from vcast.families.family import Family, PublishedModel


@dataclass(frozen=True)
class ArchTraits:
    """What one arch's model does, where the two archs differ.

    Attributes:
        windowed_vit: the ViT attends within windows of ``window_size`` px except in the
            ``fullatt_block_indexes`` blocks, over tokens reordered window by window (``window_index``);
            else (Qwen2-VL) every block attends over each temporal patch, in the LLM's order.
        gated_vit: the ViT block is RMSNorm + a SwiGLU MLP of ``intermediate_size``, its width
            ``hidden_size`` and the merger's output ``out_hidden_size``; else (Qwen2-VL) LayerNorm +
            ``fc1``/``fc2`` with QuickGELU of ``embed_dim * mlp_ratio``, the width ``embed_dim`` and
            the merger's output ``hidden_size``.
        absolute_time: the temporal MRoPE is in seconds (``tokens_per_second * second_per_grid_ts``
            per temporal patch, ``get_rope_index`` takes ``second_per_grid_ts``); else the temporal
            patch's index.
    """

    windowed_vit: bool
    gated_vit: bool
    absolute_time: bool


# By model_type (= the tiny-checkpoint arch).
ARCHS: dict[str, ArchTraits] = {
    "qwen2_5_vl": ArchTraits(windowed_vit=True, gated_vit=True, absolute_time=True),
    "qwen2_vl": ArchTraits(windowed_vit=False, gated_vit=False, absolute_time=False),
}


def arch_traits(model_type: str) -> ArchTraits:
    """The traits of ``model_type`` (``config.model_type``; ValueError for another family's)."""
    if model_type not in ARCHS:
        raise ValueError(f"{model_type!r} is not an arch of the Qwen2.5-VL family; expected one of {', '.join(ARCHS)}")
    return ARCHS[model_type]


FAMILY = Family(
    name="qwen2_5_vl",
    display="Qwen2.5-VL",
    model_types=("qwen2_5_vl", "qwen2_vl"),
    hf_classes=("Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"),
    archs=("qwen2_5_vl", "qwen2_vl"),
    adapter="vcast.families.qwen2_5_vl.adapter:Qwen25VLAdapter",
    plugin="vcast.families.qwen2_5_vl.plugin:VCastQwen25VL",
    plugin_args=("min_pixels", "max_pixels", "total_pixels", "system_prompt"),
    # lmms-eval's stock qwen2_5_vl wrapper; a Qwen2-VL model config names its own (qwen2_vl).
    prompt_key="qwen2_5_vl",
    tiny="vcast.families.qwen2_5_vl.tiny",
    flops="vcast.families.qwen2_5_vl.flops",
    real_size="vcast.families.qwen2_5_vl.real_size:real_config",
    kit_prompt="vcast.families.qwen2_5_vl.kit:video_prompt",
    frames_per_step=2,
    min_frames=2,
    mrope=True,
    deepstack=False,
    published=(
        PublishedModel("qwen2_5_vl_7b", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen2.5-VL-7B-Instruct", "qwen2_5_vl"),
        PublishedModel("qwen2_vl_7b", "Qwen/Qwen2-VL-7B-Instruct", "Qwen2-VL-7B-Instruct", "qwen2_vl"),
    ),
    method_defaults={
        # FrameFusion's Qwen2-VL example: S_th = 0.5 (docs/baselines.md), as for every Qwen family.
        "framefusion": dict(similarity_lower_bound=0.5),
        # FlashVID (Fanziyang-v/FlashVID@1d37422) scripts/qwen2_5_vl.sh (Qwen2.5-VL-7B, 28 layers): L23
        # PRUNING_LAYER=20, L24 LLM_RETENTION_RATIO=0.3, L15 MIN_SEGMENT_NUM=4, L18 attn_div ("ADTSv1 for
        # Qwen2.5-VL"); its score row is q k^T / head_dim ** 0.5 (flashvid/modeling_qwen2_5_vl.py L349).
        # Kept for Qwen2-VL-7B, whose language model has the same 28 layers (no Qwen2-VL script is cited).
        "flashvid": dict(layer=20, reference_layers=28, llm_retention=0.3, min_segment_num=4, selection="attn_div",
                         score_scale="divide"),
    },
)
