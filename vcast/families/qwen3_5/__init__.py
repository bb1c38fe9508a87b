"""Qwen3.5, dense and MoE (Qwen/Qwen3.5-27B, Qwen/Qwen3.5-35B-A3B): a hybrid language model (three
Gated DeltaNet layers per gated softmax-attention layer) behind Qwen3-VL's ViT without DeepStack,
with Qwen3-VL's processors and token layout (a ``<t seconds>`` timestamp per temporal patch).

Modules: :mod:`.adapter` (the pruning hooks' view of the model), :mod:`.plugin` (lmms-eval's
``vcast_qwen3_5``), :mod:`.tiny` (tiny checkpoints), :mod:`.flops` (the vision encoder's and the
hybrid language model's FLOPs shapes), :mod:`.real_size` (the published configs the GPU kit builds).

Pruning runs before the language model (kept tokens keep their MRoPE positions). The in-LLM methods
run where every stage reads a softmax layer (e.g. FastV ``layer=4``); the others are refused with
the reason (``hybrid_attention``, :mod:`vcast.models.hybrid_methods`).
"""

from vcast.families.family import Family, PublishedModel

FAMILY = Family(
    name="qwen3_5",
    display="Qwen3.5",
    model_types=("qwen3_5", "qwen3_5_moe"),
    hf_classes=("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    archs=("qwen3_5", "qwen3_5_moe"),
    adapter="vcast.families.qwen3_5.adapter:Qwen35Adapter",
    plugin="vcast.families.qwen3_5.plugin:VCastQwen35",
    plugin_args=("min_pixels", "max_pixels", "total_pixels", "system_prompt"),
    prompt_key="qwen3_5",
    tiny="vcast.families.qwen3_5.tiny",
    flops="vcast.families.qwen3_5.flops",
    real_size="vcast.families.qwen3_5.real_size:real_config",
    kit_prompt="vcast.families.qwen3_5.kit:video_prompt",
    frames_per_step=2,
    min_frames=2,
    mrope=True,
    deepstack=False,
    hybrid_attention=True,
    # lmms-eval's stock qwen3_5 wrapper thinks first and cuts the answer after </think>; the benchmarks'
    # short answers (and the pruning comparison) want the answer itself.
    chat_template_kwargs={"enable_thinking": False},
    published=(
        PublishedModel("qwen3_5_27b", "Qwen/Qwen3.5-27B", "Qwen3.5-27B", "qwen3_5"),
        PublishedModel("qwen3_5_35b_a3b", "Qwen/Qwen3.5-35B-A3B", "Qwen3.5-35B-A3B", "qwen3_5_moe"),
    ),
)
