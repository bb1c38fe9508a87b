"""The table of every model family, written from the facts each declares in its package.

``docs/models.md`` holds it between two marker lines; ``python -m vcast.families.table --write``
rewrites that block after a family was added or its facts changed, and a test fails while the page
and the registry disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

from vcast.closed_pipe import run_command  # noqa: E402
from vcast.doc_blocks import block_command  # noqa: E402
from vcast.families import Family, all_families  # noqa: E402
from vcast.models.hybrid_methods import LAYER_PARAMS, llm_method_refusal  # noqa: E402
from vcast.registry import available_methods, is_llm_method  # noqa: E402


START = "<!-- family table: written by `python -m vcast.families.table --write`; do not edit by hand -->"
END = "<!-- end of family table -->"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def _code(value: object) -> str:
    return f"`{value}`"


def family_row(family: Family) -> str:
    """One Markdown row: the family, its classes, plugin, configs, positions and what it runs."""
    adapter = family.load("adapter")
    classes = "<br>".join(f"`{cls}` ({_code(kind)})" for cls, kind in zip(family.hf_classes, family.model_types))
    configs = ", ".join(_code(model.config) for model in family.published) or "–"
    positions = ", ".join(_code(policy) for policy in adapter.position_policies)
    llm = "hybrid (linear + softmax attention)" if family.hybrid_attention else "softmax attention"
    llm += ", MRoPE" if family.mrope else ", 1-D RoPE"
    llm += ", DeepStack" if family.deepstack else ""
    refused = [name for name in available_methods() if is_llm_method(name) and llm_method_refusal(family, name)]
    never = [name for name in refused if name not in LAYER_PARAMS]  # no parameter moves their stages
    in_llm = "all" if not refused else (
        f"refused with their defaults: {', '.join(map(_code, refused))}; they run where every stage reads a "
        "softmax layer" + (f", except {', '.join(map(_code, never))}" if never else "") + " (notes below)")
    cells = [_code(family.name), family.display, classes, _code(family.plugin_id), configs,
             f"{_code(family.tiny_config)} (`{family.tiny_dir}`)", llm, positions, str(family.min_frames), in_llm]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def family_table() -> str:
    """The whole table (between and including the marker lines), one row per family."""
    header = ("| family | shown as | transformers classes (`model_type`) | lmms-eval plugin | published configs "
              "| tiny config (checkpoint) | language model | positions | min frames | in-LLM methods |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    rows = "\n".join(family_row(family) for family in all_families())
    return f"{START}\n{header}\n{rows}\n{END}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    return block_command(argv, "python -m vcast.families.table", __doc__.splitlines()[0], PAGE, START, END,
                         family_table)

if __name__ == "__main__":
    sys.exit(run_command(main))
