"""One home per model family: only a family's package names it, and no family package imports another's.

"Names a family" means an identifier or a string in the code (docstrings and comments are prose and
left out) that contains one of the family's names: its name, display name, plugin id, model types,
transformers classes or tiny-checkpoint archs (``qwen3_vl``, ``Qwen3-VL``, ``vcast_qwen3_vl``,
``Qwen3VLForConditionalGeneration``). Everything else asks the registry (:mod:`vcast.families`).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from vcast.families import Family, all_families

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("vcast", "baselines", "hydra_plugins")
FAMILIES_DIR = Path("vcast", "families")

# Code outside the families' packages that must name a family, and why.
NAMES_A_FAMILY = {
    "vcast/vllm/": "vLLM's own Qwen3-VL model classes are subclassed there: the vLLM backend serves that family only "
                   "(docs/vllm.md)",
    "vcast/demo_model/": "the demo model is a Qwen3-VL trained here: its recipe builds that family's checkpoint",
    "vcast/gpucheck/": "the GPU kit measures the paper's efficiency table on the paper's two models (Qwen3-VL-8B, "
                       "LLaVA-OneVision-7B) at their published sizes",
    "vcast/report/layouts.py": "the paper's tables: their captions name the paper's models",
    "vcast/checkpoint_paths.py": "the demo model's and the vLLM demo's checkpoint folders",
    "vcast/eval/plugin_args.py": "the vLLM backend's display name",
    "baselines/fastvid/": "FastVID names its releases after the models they ship (its `version` parameter: "
                          "llava_ov, llava_video, qwen2_5_vl)",
}
# A string citing public code (``owner/repo@commit path``) may name the file it cites.
CITATION = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{7}")


def family_names(family: Family) -> set[str]:
    return {family.name, family.display, family.plugin_id, *family.model_types, *family.hf_classes, *family.archs}


def docstring_starts(tree: ast.AST) -> set[tuple[int, int]]:
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                starts.add((first.lineno, first.col_offset))
    return starts


def code_words(path: Path) -> list[tuple[int, str]]:
    """``(line, word)`` for every identifier and non-docstring string of ``path``."""
    text = path.read_text(encoding="utf-8")
    docstrings = docstring_starts(ast.parse(text))
    words = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.NAME or (token.type == tokenize.STRING and token.start not in docstrings):
            words.append((token.start[0], token.string))
    return words


def own_family(path: Path) -> str | None:
    """The family whose package holds ``path`` (relative to the repository), or None."""
    parts = path.parts
    return parts[2] if parts[:2] == FAMILIES_DIR.parts and len(parts) > 3 else None


def sources() -> list[Path]:
    return sorted(path.relative_to(REPO) for root in SCANNED for path in (REPO / root).rglob("*.py"))


def naming(path: Path, families: tuple[Family, ...]) -> list[str]:
    """``"line: word (family)"`` for each place ``path`` names a family other than its own."""
    own = own_family(path)
    found = []
    for line, word in code_words(REPO / path):
        if word.startswith(("'", '"', "f'", 'f"')) and CITATION.search(word):
            continue
        for family in families:
            if family.name != own and any(name in word for name in family_names(family)):
                found.append(f"{path}:{line}: {word[:70]} ({family.name})")
    return found


def allowed(path: Path) -> bool:
    return any(str(path).startswith(prefix) for prefix in NAMES_A_FAMILY)


def test_no_file_outside_a_family_package_names_the_family() -> None:
    families = all_families()
    found = [hit for path in sources() if not allowed(path) for hit in naming(path, families)]
    assert not found, ("a family is named outside its package (ask vcast.families instead, or declare the fact in "
                       "the family's package):\n" + "\n".join(found))


def test_the_scan_finds_a_family_named_outside_its_package(tmp_path: Path) -> None:
    """The check above can fail: the same scan on a module that branches on a model type."""
    module = tmp_path / "branch.py"
    module.write_text('"""Qwen3-VL in a docstring is prose."""\n'
                      'def kind(config):\n'
                      '    # a comment may say llava_onevision\n'
                      '    return "merge" if config.model_type == "qwen3_vl" else "pool"\n', encoding="utf-8")
    words = [word for _, word in code_words(module)]
    assert '"qwen3_vl"' in words and not any("Qwen3-VL" in word or "llava" in word for word in words)


@pytest.mark.parametrize("prefix", sorted(NAMES_A_FAMILY))
def test_every_exception_is_still_needed(prefix: str) -> None:
    """An entry of NAMES_A_FAMILY whose files no longer name a family must go."""
    families = all_families()
    paths = [path for path in sources() if str(path).startswith(prefix)]
    assert paths, f"{prefix} matches no source file"
    assert any(naming(path, families) for path in paths), f"{prefix} names no family any more: remove its exception"


def test_no_family_package_imports_another() -> None:
    names = {family.name for family in all_families()}
    found = []
    for path in sources():
        own = own_family(path)
        if own is None:
            continue
        for node in ast.walk(ast.parse((REPO / path).read_text(encoding="utf-8"))):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for module in modules:
                parts = module.split(".")
                if parts[:2] == ["vcast", "families"] and len(parts) > 2 and parts[2] in names and parts[2] != own:
                    found.append(f"{path}: imports {module}")
    assert not found, "family packages must not import each other (share code in a neutral module):\n" + "\n".join(found)


def test_every_family_package_declares_what_the_registry_needs() -> None:
    """Each fact named as a module path imports, and the plugin is this family's."""
    for family in all_families():
        for fact in ("adapter", "plugin", "tiny", "flops"):
            assert family.load(fact) is not None, (family.name, fact)
        assert family.load("plugin").family is family
        assert (REPO / "configs" / "model" / f"{family.tiny_config}.yaml").is_file(), family.tiny_config
        for model in family.published:
            assert (REPO / "configs" / "model" / f"{model.config}.yaml").is_file(), model.config


def test_the_docs_family_table_is_the_registry_s() -> None:
    """Adding a family or changing its facts: run ``python -m vcast.families.table --write``."""
    from vcast.doc_blocks import page_block
    from vcast.families.table import END, PAGE, START, family_table

    assert page_block(PAGE.read_text(encoding="utf-8"), START, END) == family_table()
