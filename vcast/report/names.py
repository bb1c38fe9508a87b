"""How models and methods are named in tables and figures (config name -> display name).

``plain`` is for Markdown and figures, :func:`latex` escapes it for LaTeX, and
:func:`paper_name` is the spelling ``paper_tables.csv`` uses.
"""

from __future__ import annotations

from vcast.families import published_models
from vcast.registry import available_methods, method_facts

# Model config name -> display name: every family's published checkpoints (vcast.families).
MODELS = {model.config: model.display for _, model in published_models()}

# Method configs that are a registered method with other parameters (ablation and composite rows):
# config name -> (display name, venue shown after it in LaTeX). A registered method's own name and
# venue are its facts (:func:`vcast.registry.method_facts`), declared where it registers.
CONFIG_ROWS: dict[str, tuple[str, str]] = {
    "vcast_official": ("V-CAST (official code)", ""),
    "vcast_tau06": ("V-CAST (τ = 0.6)", ""),
    "vcast_tau09": ("V-CAST (τ = 0.9)", ""),
    "vcast_w09_11": ("V-CAST (w = 0.9, 1.1)", ""),
    "vcast_w11_09": ("V-CAST (w = 1.1, 0.9)", ""),
    "vcast_w13_07": ("V-CAST (w = 1.3, 0.7)", ""),
    "vcast_uniform": ("Uniform Allocation", ""),
    "vcast_random_alloc": ("Random Allocation", ""),
    "vcast_uniqueness": ("Global Uniqueness", ""),
    "vcast_diversity": ("Contextual Diversity Only", ""),
    "vcast_activation": ("Feature Activation Only", ""),
    "visionzip_vcast": ("VisionZip + V-CAST", ""),
    "vidcom2_vcast": ("VidCom² + V-CAST", ""),
}


def method_label(method: str) -> tuple[str, str]:
    """``(display name, venue)`` of a method config name: its row in :data:`CONFIG_ROWS`, else the
    registered method's facts, else ``(method, "")`` (e.g. a method of an ad-hoc experiment)."""
    if method in CONFIG_ROWS:
        return CONFIG_ROWS[method]
    if method in available_methods():
        facts = method_facts(method)
        return facts.display, facts.venue
    return method, ""


def model_name(model: str) -> str:
    """The model's display name (the config name when it has none, e.g. tiny test models)."""
    return MODELS.get(model, model)


def method_name(method: str) -> str:
    """The method's display name (the config name when it has none)."""
    return method_label(method)[0]


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
    plain, venue = method_label(method)
    label = latex(plain)
    if venue == "Ours":
        return rf"\textbf{{{label} {{\scriptsize (Ours)}}}}"
    return rf"{label} {{\scriptsize ({venue})}}" if venue else label
