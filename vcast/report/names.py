"""How models and methods are named in tables and figures (config name -> display name).

``plain`` is for Markdown and figures, :func:`latex` escapes it for LaTeX, and
:func:`paper_name` is the spelling ``paper_tables.csv`` uses.
"""

from __future__ import annotations

MODELS = {
    "qwen3vl_8b": "Qwen3-VL-8B-Instruct",
    "qwen3vl_32b": "Qwen3-VL-32B-Instruct",
    "qwen3vl_30b_a3b": "Qwen3-VL-30B-A3B-Instruct",
    "llava_ov_7b": "LLaVA-OV-7B",
    "llava_video_7b": "LLaVA-Video-7B",
}

# config name -> (display name, venue shown after it in LaTeX)
METHODS: dict[str, tuple[str, str]] = {
    "vanilla": ("Vanilla", ""),
    "vcast": ("V-CAST", "Ours"),
    "vcast_official": ("V-CAST (official code)", ""),
    "visionzip": ("VisionZip", "CVPR'25"),
    "vidcom2": ("VidCom²", "EMNLP'25"),
    "fastvid": ("FastVID", "NeurIPS'25"),
    "holitom": ("HoliTom", "NeurIPS'25"),
    "flashvid": ("FlashVID", "ICLR'26"),
    "fastv": ("FastV", "ECCV'24"),
    "pdrop": ("PDrop", "CVPR'25"),
    "sparsevlm": ("SparseVLM", "ICML'25"),
    "prunevid": ("PruneVid", "ACL'25"),
    "framefusion": ("FrameFusion", "ICCV'25"),
    "random": ("Random", ""),
    "uniform": ("Uniform", ""),
    "evs": ("EVS", "vLLM"),
    "fewer_frames": ("Fewer frames", ""),
    "downsample": ("Downsample", ""),
    "dycoke": ("DyCoke (TTM)", "CVPR'25"),
    "prunevid_stage_a": ("PruneVid (stage A)", "ACL'25"),
    "framefusion_merge": ("FrameFusion (first merge)", "ICCV'25"),
    "flashvid_merge": ("FlashVID (vision side)", "ICLR'26"),
    "holitom_llm": ("HoliTom (+ in-LLM merge)", "NeurIPS'25"),
    "vcast_tau06": ("V-CAST (τ = 0.6)", ""),
    "vcast_tau09": ("V-CAST (τ = 0.9)", ""),
    "vcast_w09_11": ("V-CAST (w = 0.9, 1.1)", ""),
    "vcast_w11_09": ("V-CAST (w = 1.1, 0.9)", ""),
    "vcast_w13_07": ("V-CAST (w = 1.3, 0.7)", ""),
    "avgpool_2x2": ("AvgPool (2x2)", ""),
    "first_2x2": ("First (2x2)", ""),
    "random_2x2": ("Random (2x2)", ""),
    "vcast_uniform": ("Uniform Allocation", ""),
    "vcast_random_alloc": ("Random Allocation", ""),
    "vcast_uniqueness": ("Global Uniqueness", ""),
    "vcast_diversity": ("Contextual Diversity Only", ""),
    "vcast_activation": ("Feature Activation Only", ""),
    "visionzip_vcast": ("VisionZip + V-CAST", ""),
    "vidcom2_vcast": ("VidCom² + V-CAST", ""),
}


def model_name(model: str) -> str:
    """The model's display name (the config name when it has none, e.g. tiny test models)."""
    return MODELS.get(model, model)


def method_name(method: str) -> str:
    """The method's display name (the config name when it has none)."""
    return METHODS.get(method, (method, ""))[0]


def paper_name(plain: str) -> str:
    """``plain`` as ``paper_tables.csv`` writes it (ASCII)."""
    return plain.replace("²", "2")


def latex(plain: str) -> str:
    """``plain`` as LaTeX text: specials escaped, ``²`` and ``(2x2)`` typeset as the paper does."""
    out = plain
    for char, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                          ("#", r"\#"), ("$", r"\$"), ("{", r"\{"), ("}", r"\}")):
        out = out.replace(char, escaped)
    return (out.replace("²", "$^2$").replace("(2x2)", r"($2\times2$)").replace("τ", r"$\tau$"))


def method_latex(method: str) -> str:
    """The method's LaTeX row label, with its venue in small type (``Ours`` in bold)."""
    plain, venue = METHODS.get(method, (method, ""))
    label = latex(plain)
    if venue == "Ours":
        return rf"\textbf{{{label} {{\scriptsize (Ours)}}}}"
    return rf"{label} {{\scriptsize ({venue})}}" if venue else label
