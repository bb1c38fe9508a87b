"""Qwen3-VL, dense and MoE (Qwen/Qwen3-VL-8B, -32B, -30B-A3B Instruct): the family the paper evaluates.

Modules: :mod:`.adapter` (the pruning hooks' view of the model), :mod:`.plugin` (lmms-eval's
``vcast_qwen3_vl``), :mod:`.tiny` (tiny checkpoints), :mod:`.real_size` (the published configs the
GPU kit builds); its FLOPs shape is the shared Qwen ViT's (:mod:`vcast.models.merging_vit_flops`).
"""

from vcast.families.family import Family, PublishedModel

FAMILY = Family(
    name="qwen3_vl",
    display="Qwen3-VL",
    model_types=("qwen3_vl", "qwen3_vl_moe"),
    hf_classes=("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"),
    archs=("qwen3_vl", "qwen3_vl_moe"),
    adapter="vcast.families.qwen3_vl.adapter:Qwen3VLAdapter",
    plugin="vcast.families.qwen3_vl.plugin:VCastQwen3VL",
    plugin_args=("min_pixels", "max_pixels", "total_pixels", "system_prompt"),
    prompt_key="qwen3_vl",
    tiny="vcast.families.qwen3_vl.tiny",
    flops="vcast.models.merging_vit_flops",  # the Qwen ViT with its DeepStack mergers
    real_size="vcast.families.qwen3_vl.real_size:real_config",
    kit_prompt="vcast.families.qwen3_vl.kit:video_prompt",
    frames_per_step=2,
    min_frames=2,
    mrope=True,
    deepstack=True,
    published=(
        PublishedModel("qwen3vl_8b", "Qwen/Qwen3-VL-8B-Instruct", "Qwen3-VL-8B-Instruct", "qwen3_vl"),
        PublishedModel("qwen3vl_32b", "Qwen/Qwen3-VL-32B-Instruct", "Qwen3-VL-32B-Instruct", "qwen3_vl"),
        PublishedModel("qwen3vl_30b_a3b", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen3-VL-30B-A3B-Instruct",
                       "qwen3_vl_moe"),
    ),
    tiny_config="tiny_qwen3vl",
    method_defaults={
        # FlashVID (Fanziyang-v/FlashVID@1d37422) scripts/qwen3_vl.sh: K = 28 of 36 layers, llm_retention 0.1,
        # min_segment_num 4, attn_div (v1); its manual score row scales q k^T by / head_dim ** 0.5
        # (modeling_qwen3_vl.py L582-589).
        "flashvid": dict(layer=28, reference_layers=36, llm_retention=0.1, min_segment_num=4, selection="attn_div",
                         score_scale="divide"),
        # FrameFusion's Qwen2-VL example: S_th = 0.5 (docs/baselines.md).
        "framefusion": dict(similarity_lower_bound=0.5),
    },
)
