"""The table of every registered method, written from the facts each declares where it registers.

``docs/baselines.md`` holds it between two marker lines; ``python -m vcast.method_table --write``
rewrites that block after a method was added or its facts changed, and a test fails while the
page and the registry disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional, Sequence

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

from vcast.closed_pipe import run_command  # noqa: E402
from vcast.doc_blocks import block_command, page_block, write_block  # noqa: E402
from vcast.registry import available_methods, method_facts, method_inputs, method_kind, method_params, method_variants  # noqa: E402


START = "<!-- method table: written by `python -m vcast.method_table --write`; do not edit by hand -->"
END = "<!-- end of method table -->"
PAGE = Path(__file__).resolve().parents[1] / "docs" / "baselines.md"
WHERE = {"vision": "vision side", "llm": "in the LLM", "input": "model input"}


def _code(value: object) -> str:
    return f"`{value}`"


def _variants(name: str) -> str:
    facts = method_facts(name)
    parts = []
    for variant in method_variants(name):
        source = facts.code.get(variant)
        parts.append(f"{_code(variant)}: {source}" if source else _code(variant))
    return "<br>".join(parts)


def _defaults(name: str) -> str:
    params = {key: value for key, value in method_params(name).items() if key != "variant"}
    return ", ".join(f"`{key}={value!r}`" for key, value in params.items()) or "–"


def method_row(name: str) -> str:
    """One Markdown row: name, display name, paper, where it runs, model inputs, variants with the
    code each follows, parameters with their defaults."""
    facts = method_facts(name)
    where = WHERE[method_kind(name)] + (", vLLM" if facts.vllm else "")
    inputs = ", ".join(map(_code, method_inputs(name))) or "–"
    display = f"{facts.display} ({facts.venue})" if facts.venue else facts.display
    cells = [_code(name), display, facts.paper or "–", where, inputs, _variants(name), _defaults(name)]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def method_table() -> str:
    """The whole table (between and including the marker lines), one row per registered method."""
    header = ("| method | shown as | paper | runs | model inputs | variants: code followed | parameters (defaults) |\n"
              "|---|---|---|---|---|---|---|")
    rows = "\n".join(method_row(name) for name in available_methods())
    return f"{START}\n{header}\n{rows}\n{END}"


def page_table(text: str) -> Optional[str]:
    """The block between the markers in ``text`` (markers included), or None without them."""
    return page_block(text, START, END)


def write(page: Path = PAGE) -> bool:
    """Rewrite ``page``'s block; True if it changed. ValueError when the page has no markers."""
    return write_block(page, START, END, method_table())


def main(argv: Optional[Sequence[str]] = None) -> int:
    return block_command(argv, "python -m vcast.method_table", __doc__.splitlines()[0], PAGE, START, END, method_table)

if __name__ == "__main__":
    sys.exit(run_command(main))
