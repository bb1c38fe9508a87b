"""LLaVA-OneVision and LLaVA-Video in Hugging Face format (one architecture,
``LlavaOnevisionForConditionalGeneration``): the paper's LLaVA family.

Modules: :mod:`.adapter`, :mod:`.plugin` (lmms-eval's ``vcast_llava_ov``), :mod:`.tiny`,
:mod:`.flops`, :mod:`.real_size`.
"""

from vcast.families.family import Family, PublishedModel

FAMILY = Family(
    name="llava_onevision",
    display="LLaVA-OneVision",
    model_types=("llava_onevision",),
    hf_classes=("LlavaOnevisionForConditionalGeneration",),
    archs=("llava_onevision",),
    adapter="vcast.families.llava_onevision.adapter:LlavaOnevisionAdapter",
    plugin="vcast.families.llava_onevision.plugin:VCastLlavaOV",
    plugin_args=("chat_template",),
    prompt_key="llava_onevision",
    tiny="vcast.families.llava_onevision.tiny",
    flops="vcast.families.llava_onevision.flops",
    real_size="vcast.families.llava_onevision.real_size:real_config",
    kit_prompt="vcast.families.llava_onevision.kit:video_prompt",
    frames_per_step=1,
    min_frames=1,
    mrope=False,
    fixed_resolution=("the LLaVA-OneVision vision tower takes a fixed 384x384 input (learned position embeddings "
                      "for its 27x27 patches); use avgpool_2x2 (the 2x2 mean of the token grid) instead"),
    published=(
        PublishedModel("llava_ov_7b", "llava-hf/llava-onevision-qwen2-7b-ov-hf", "LLaVA-OV-7B", "llava_onevision"),
        PublishedModel("llava_video_7b", "lmms-lab/LLaVA-Video-7B-Qwen2", "LLaVA-Video-7B", "llava_onevision"),
    ),
    plugin_id="vcast_llava_ov",
    tiny_config="tiny_llava_ov",
    method_defaults={
        # FlashVID (Fanziyang-v/FlashVID@1d37422) scripts/llava_ov.sh, llava_vid.sh: K = 20 of 28 layers,
        # llm_retention 0.3, min_segment_num 8, attn_div_v2; its manual score row scales q k^T by
        # * self.scaling (modeling_qwen2.py L202-207).
        "flashvid": dict(layer=20, reference_layers=28, llm_retention=0.3, min_segment_num=8, selection="attn_div_v2",
                         score_scale="multiply"),
    },
)
