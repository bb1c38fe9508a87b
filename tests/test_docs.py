"""The docs run as shown: every Python block of the README and ``docs/*.md`` is executed (each
page's blocks in order, one namespace, from the repository root, with the tiny checkpoint as the
model), except blocks marked ``<!-- no-run: why -->``, which are counted so that none is skipped
by accident. Shell blocks are checked for what can be checked offline: the make targets exist,
``python -m`` modules import and ``python scripts/*.py`` exist, the options shown for vcast's own
commands and scripts parse, the sweep's config choices and keys exist, and ``lmms-eval`` lines
name vcast's models and, for vcast's own tasks, the ``--include_path`` lmms-eval needs to find
them."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- no-run:.*-->$", re.M)  # a marker on its own line
FENCE = re.compile(r"(?:<!-- no-run: (?P<why>[^>]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```", re.S)
# Blocks that cannot run here (a GPU, real checkpoints, benchmark data), per page: a new one must
# be counted here on purpose.
NO_RUN = {"README.md": 3, "docs/vllm.md": 1}
CONFIGS = REPO / "configs"
TASKS = REPO / "vcast" / "eval" / "tasks"


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _blocks(page: Path) -> list[re.Match]:
    return list(FENCE.finditer(page.read_text(encoding="utf-8")))


def test_no_run_blocks_are_counted_and_say_why() -> None:
    counted = {}
    for page in PAGES:
        marked = [block for block in _blocks(page) if block["why"] is not None]
        assert all(block["why"].strip() for block in marked), _name(page)
        # A marker that is not right above a fence would mark nothing and hide nothing: refuse it.
        markers = len(MARKER.findall(page.read_text(encoding="utf-8")))
        assert markers == len(marked), f"{_name(page)}: a no-run marker not right above a code block"
        if marked:
            counted[_name(page)] = len(marked)
    assert counted == NO_RUN


@pytest.mark.parametrize("page", PAGES, ids=[_name(p) for p in PAGES])
def test_python_blocks_run(page: Path, tiny_dirs: dict, synth_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("VCAST_MODEL", str(tiny_dirs["qwen3_vl"]))  # the examples' model, as a user sets it
    monkeypatch.delenv("VCAST_VIDEO", raising=False)               # the examples' default clip
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(_blocks(page), 1):
        if block["lang"] == "python" and block["why"] is None:
            exec(compile(block["code"], f"{_name(page)} block {number}", "exec"), namespace)


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


def _after(line: str, command: str) -> list[str]:
    """The words after ``command`` on a shell line (quotes as the shell reads them)."""
    return shlex.split(line.split(command, 1)[1])


def _check_report_args(words: list[str], where: str) -> None:
    from vcast.report.__main__ import _parser

    try:
        _parser().parse_args(words)
    except SystemExit:
        pytest.fail(f"{where}: python -m vcast.report does not accept {words}")


def _check_status_args(words: list[str], where: str) -> None:
    source = (REPO / "vcast" / "sweep" / "status.py").read_text(encoding="utf-8")
    options = set(re.findall(r'add_argument\(\s*"(--[\w-]+)"', source))
    for word in words:
        if word.startswith("--"):
            assert word in options, f"{where}: {word} is not an option of vcast.sweep.status ({sorted(options)})"


def _check_script_args(script: str, words: list[str], where: str) -> None:
    """``python scripts/<name>.py``: the script exists and takes every ``--option`` shown."""
    path = REPO / script
    assert path.is_file(), f"{where}: no {script}"
    options = set(re.findall(r'add_argument\(\s*"(--[\w-]+)"', path.read_text(encoding="utf-8")))
    for word in words:
        option = word.strip("[]")
        if option.startswith("--"):
            assert option in options, f"{where}: {option} is not an option of {script} ({sorted(options)})"


def _check_sweep_overrides(words: list[str], where: str) -> None:
    """``group=choice`` names a config file; a plain ``key=value`` is a key of configs/sweep.yaml."""
    keys = set(yaml.safe_load((CONFIGS / "sweep.yaml").read_text(encoding="utf-8")))
    for word in words:
        found = re.fullmatch(r"([\w/]+)=(\S+)", word)
        if not found or "<" in word:  # flags, +/~ overrides, dotted paths, placeholders
            continue
        key, value = found.groups()
        if (CONFIGS / key).is_dir():
            for choice in value.split(","):
                assert (CONFIGS / key / f"{choice}.yaml").is_file(), f"{where}: no configs/{key}/{choice}.yaml"
        else:
            assert key in keys, f"{where}: {key} is neither a config group nor a key of configs/sweep.yaml"
    # dotted and + overrides too: what the sweep itself refuses before any job
    from vcast.sweep.overrides import unread_overrides

    unread = unread_overrides([word for word in words if "<" not in word])
    assert not unread, f"{where}: the sweep refuses {unread}"


def _check_lmms_eval(words: list[str], where: str) -> None:
    from vcast.eval.manifests import MODELS

    options = dict(zip(words, words[1:]))
    assert options.get("--model") in MODELS, f"{where}: --model is not one of vcast's plugins {sorted(MODELS)}"
    own = {path.stem for path in TASKS.glob("*/*.yaml")}  # vcast_synth, vcast_synth_heldout
    if own & set(options.get("--tasks", "").split(",")):
        # lmms-eval 0.7.3 finds tasks only in its own folder or an --include_path.
        assert options.get("--include_path") == "vcast/eval/tasks", f"{where}: vcast's tasks need --include_path"


CHECKS = {"vcast.report": _check_report_args, "vcast.sweep.status": _check_status_args,
          "vcast.sweep": _check_sweep_overrides}


@pytest.mark.parametrize("page", PAGES, ids=[_name(p) for p in PAGES])
def test_shell_blocks_name_what_exists(page: Path) -> None:
    targets = _make_targets()
    for line in _shell_lines(page):
        where = f"{_name(page)}: {line}"
        words = line.split()
        if words[0] == "make":
            named = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
            assert set(named) <= targets, where
        if words[0] == "lmms-eval":
            _check_lmms_eval(_after(line, "lmms-eval"), where)
        for script in re.findall(r"python (scripts/[\w/]+\.py)", line):
            _check_script_args(script, _after(line, script), where)
        for module in re.findall(r"python -m ([\w.]+)", line):
            assert importlib.util.find_spec(module) is not None, where
            if module in CHECKS:
                CHECKS[module](_after(line, f"python -m {module}"), where)
