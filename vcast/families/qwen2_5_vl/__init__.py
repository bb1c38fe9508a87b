"""Qwen2.5-VL (Qwen/Qwen2.5-VL-3B, -7B, -32B, -72B Instruct; transformers' ``qwen2_5_vl``).

Modules: :mod:`.adapter` (the pruning hooks' view of the model: one run of video tokens per
video, a windowed ViT), :mod:`.plugin` (lmms-eval's ``vcast_qwen2_5_vl``), :mod:`.tiny` (tiny
checkpoints), :mod:`.flops` (the windowed ViT's FLOPs), :mod:`.real_size` (the published config
the GPU kit builds).
"""

from vcast.families.family import Family, PublishedModel

FAMILY = Family(
    name="qwen2_5_vl",
    display="Qwen2.5-VL",
    model_types=("qwen2_5_vl",),
    hf_classes=("Qwen2_5_VLForConditionalGeneration",),
    archs=("qwen2_5_vl",),
    adapter="vcast.families.qwen2_5_vl.adapter:Qwen25VLAdapter",
    plugin="vcast.families.qwen2_5_vl.plugin:VCastQwen25VL",
    plugin_args=("min_pixels", "max_pixels", "total_pixels", "system_prompt"),
    prompt_key="qwen2_5_vl",
    tiny="vcast.families.qwen2_5_vl.tiny",
    flops="vcast.families.qwen2_5_vl.flops",
    real_size="vcast.families.qwen2_5_vl.real_size:real_config",
    frames_per_step=2,
    min_frames=2,
    mrope=True,
    deepstack=False,
    published=(
        PublishedModel("qwen2_5_vl_7b", "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen2.5-VL-7B-Instruct", "qwen2_5_vl"),
    ),
    method_defaults={
        # FrameFusion's Qwen2-VL example: S_th = 0.5 (docs/baselines.md), as for every Qwen family.
        "framefusion": dict(similarity_lower_bound=0.5),
        # FlashVID (Fanziyang-v/FlashVID@1d37422) scripts/qwen2_5_vl.sh (Qwen2.5-VL-7B, 28 layers): L23
        # PRUNING_LAYER=20, L24 LLM_RETENTION_RATIO=0.3, L15 MIN_SEGMENT_NUM=4, L18 attn_div ("ADTSv1 for
        # Qwen2.5-VL"); its score row is q k^T / head_dim ** 0.5 (flashvid/modeling_qwen2_5_vl.py L349).
        "flashvid": dict(layer=20, reference_layers=28, llm_retention=0.3, min_segment_num=4, selection="attn_div",
                         score_scale="divide"),
    },
)
