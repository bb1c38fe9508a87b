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
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- no-run:.*-->$", re.M)  # a marker on its own line
FENCE = re.compile(r"(?:<!-- no-run: (?P<why>[^>]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```", re.S)
# Blocks that cannot run here (a GPU, real checkpoints, benchmark data), per page: a new one must
# be counted here on purpose.
NO_RUN = {"README.md": 3, "docs/fidelity.md": 1, "docs/harness.md": 2, "docs/report.md": 2, "docs/vllm.md": 1}
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


# Shell examples that a fresh clone's run leaves to the tests named: minutes of work, another
# environment, the network. Matched on the line's first words; everything else runs.
ELSEWHERE = {
    "make test": "the suite itself",
    "make demo": "4-5 minutes: tests/test_report_tables.py runs the demo's grid and report (2 items)",
    "make demo-full": "20-60 minutes: the same grid as make demo, more cells",
    "make demo-model": "17 minutes of training: tests/test_demo_model.py trains a few steps",
    "make demo-vllm": "the vLLM environment (make test-vllm)",
    "make setup-vllm": "the vLLM environment (make test-vllm)",
    "make setup-vllm-eval": "the vLLM environment (make test-vllm)",
    "make test-vllm": "the vLLM environment (make test-vllm)",
    "make bench-vllm": "the vLLM environment (make test-vllm)",
    "make bench-serve": "the vLLM environment and minutes of serving (its pieces: tests/test_serve_load.py)",
    ".venv-vllm/bin/python": "the vLLM environment (make test-vllm)",
    "make gpu-check": "tests/test_gpucheck.py runs its CPU mode",
    "OUT=/tmp/gpu-check make gpu-check": "tests/test_gpucheck.py runs its CPU mode",
    "python -m vcast.gpucheck": "tests/test_gpucheck.py runs its CPU mode",
    "python -m vcast.demo_model.train": "training: tests/test_demo_model.py trains a few steps",
    "python scripts/bench_baselines.py": "a benchmark of minutes: tests/test_scripts.py runs it small",
    "echo /.whl/": "edits .git/info/exclude for the device's wheels (docs/gpu.md)",
    "python3 -m pip download": "the network",
}
PREREQUISITE = re.compile(r"[Aa]fter `make ([\w -]+)`")


def _fresh_clone(destination: Path) -> Path:
    """The files a fresh clone has (tracked, and untracked ones git does not ignore: no built
    checkpoints, data or results), modification times kept, with this checkout's ``.venv``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, destination / name)
    (destination / ".venv").symlink_to(REPO / ".venv")
    return destination


def _examples(page: Path) -> list[tuple[list[str], set[str]]]:
    """Each runnable shell block of ``page`` (not marked no-run): its command lines, and the make
    targets its prose names as prerequisites (``after `make tiny-checkpoints synth-data```)."""
    text = page.read_text(encoding="utf-8")
    blocks, previous_end = [], 0
    for block in FENCE.finditer(text):
        prose = text[previous_end:block.start()]
        previous_end = block.end()
        if block["lang"] not in ("bash", "sh") or block["why"] is not None:
            continue
        lines = [line.split("  #")[0].strip() for line in block["code"].replace("\\\n", " ").splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        needed = {target for found in PREREQUISITE.findall(prose) for target in found.split()}
        blocks.append((lines, needed))
    return blocks


def _without_options(line: str) -> str:
    """``line`` without its ``--option value`` words: what stays the same between variants of one command."""
    words, kept = shlex.split(line), []
    for word in words:
        if word.startswith("--") or (kept and kept[-1].startswith("--")):
            kept.append(word)
    return " ".join(word for word in words if word not in kept)


RUNNABLE_PAGES = [page for page in PAGES if any(
    not any(line.startswith(prefix) for prefix in ELSEWHERE) for lines, _ in _examples(page) for line in lines)]


@pytest.mark.slow
@pytest.mark.fresh_clone
@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=[_name(p) for p in RUNNABLE_PAGES])
def test_shell_examples_run_on_a_fresh_clone(page: Path, tmp_path: Path) -> None:
    """Every shell example, as written, in a fresh clone (nothing built, no data, no results): it
    succeeds, or ends with an error of its own (no Python traceback from vcast) and, where the page
    names its prerequisites (``after `make X```), some line of the example names ``make X``."""
    clone = _fresh_clone(tmp_path / "clone")
    env = {**os.environ, "PATH": f"{clone / '.venv' / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(clone),
           "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONUNBUFFERED": "1"}
    for name in ("VCAST_TINY_QWEN3VL", "VCAST_DEMO_QWEN3VL", "VCAST_SLURM_PARTITION"):
        env.pop(name, None)
    problems, seen = [], set()
    for lines, needed in _examples(page):
        outputs = []
        for line in lines:
            if any(line.startswith(prefix) for prefix in ELSEWHERE) or _without_options(line) in seen:
                continue  # the same command with other --options ran already (test_shell_blocks_name_what_exists parses them)
            seen.add(_without_options(line))
            run = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True,
                                 timeout=300)
            output = run.stdout + run.stderr
            outputs.append(output)
            own_traceback = "Traceback" in output and not line.startswith("lmms-eval")
            if run.returncode != 0 and (own_traceback or not output.strip()):
                problems.append(f"{line}: exit {run.returncode} without an error of its own:\n{output[-1500:]}")
        if needed and outputs and not any(f"make {target}" in out for out in outputs for target in needed):
            problems.append(f"{lines}: no line names its prerequisite (make {' / make '.join(sorted(needed))}):\n"
                            + "\n".join(out[-800:] for out in outputs))
    assert not problems, "\n\n".join(problems)


def test_the_readme_demo_table_is_the_summary_make_demo_full_prints() -> None:
    """The README's demo table is ``make demo-full``'s ``results/demo/demo-summary.md`` as printed:
    its header (ratios ascending, the paired column at the smallest), its rows in the grid's order,
    each method by the one name every output uses."""
    from vcast.report.names import method_name
    from vcast.sweep.grid import experiment_methods

    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text[text.index("**What the demo shows.**"):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = lines[start:next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header == ["Method", "r = 0.15", "r = 0.25", "r = 0.35", "Δ vs V-CAST, r = 0.15"]
    printed = [row.strip("|").split("|")[0].strip().replace("**", "") for row in table[2:]]
    names = [method_name(method) for method in experiment_methods("demo")]
    assert len(printed) == len(names)
    for shown, name in zip(printed, names):  # the name, then at most a footnote mark (¹, ¹⁰)
        assert shown.startswith(name) and re.fullmatch("[⁰¹²³⁴⁵⁶⁷⁸⁹]*", shown[len(name):]), (shown, name)
