"""The docs run as shown: every Python block of the README and ``docs/*.md`` is executed (each
page's blocks in order, one namespace, from the repository root, with the tiny checkpoint as the
model), except blocks marked ``<!-- no-run: why -->``, which are counted so that none is skipped
by accident. Shell blocks are checked for what can be checked offline: the make targets exist,
``python -m`` modules import, and the flags shown for vcast's own commands exist."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"(?:<!-- no-run: (?P<why>[^>]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```", re.S)
# Blocks that cannot run here (a GPU, real checkpoints, benchmark data), per page: a new one must
# be counted here on purpose.
NO_RUN = {"README.md": 4, "baselines.md": 1}
FLAG_MODULES = {"vcast.report": REPO / "vcast" / "report" / "__main__.py",
                "vcast.sweep.status": REPO / "vcast" / "sweep" / "status.py"}


def _blocks(page: Path) -> list[re.Match]:
    return list(FENCE.finditer(page.read_text(encoding="utf-8")))


def test_no_run_blocks_are_counted_and_say_why() -> None:
    counted = {}
    for page in PAGES:
        marked = [block for block in _blocks(page) if block["why"] is not None]
        assert all(block["why"].strip() for block in marked), page.name
        if marked:
            counted[page.name] = len(marked)
    assert counted == NO_RUN


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_python_blocks_run(page: Path, tiny_dirs: dict, synth_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("VCAST_MODEL", str(tiny_dirs["qwen3_vl"]))  # the examples' model, as a user sets it
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(_blocks(page), 1):
        if block["lang"] == "python" and block["why"] is None:
            exec(compile(block["code"], f"{page.name} block {number}", "exec"), namespace)


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", text, re.M))
    for variable in ("REPORT_TABLES", "REPORT_FIGURES"):
        found = re.search(rf"^{variable} := (.*?)(?<!\\)\n", text, re.M | re.S)
        if found:
            targets |= set(found.group(1).replace("\\\n", " ").split())
    return targets


def _shell_lines(page: Path) -> list[str]:
    lines = []
    for block in _blocks(page):
        if block["lang"] in ("bash", "sh"):
            joined = block["code"].replace("\\\n", " ")
            lines += [line.split("#")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_shell_blocks_name_what_exists(page: Path) -> None:
    targets = _make_targets()
    for line in _shell_lines(page):
        words = line.split()
        if words[0] == "make":
            named = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
            assert set(named) <= targets, f"{page.name}: {line}"
        for module in re.findall(r"python -m ([\w.]+)", line):
            assert importlib.util.find_spec(module) is not None, f"{page.name}: {line}"
            source = FLAG_MODULES.get(module)
            if source is not None:
                flags = re.findall(r"(?<![\w-])(--[a-z][\w-]*)", line.split(f"python -m {module}", 1)[1])
                text = source.read_text(encoding="utf-8")
                for flag in flags:
                    assert f'"{flag}"' in text, f"{page.name}: {flag} is not an option of {module}: {line}"
