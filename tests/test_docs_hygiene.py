"""Figures in the docs that cannot drift, examples that write where git does not look, and a
repository that reads nothing outside itself.

How long something takes, how fast it runs and how many tests pass change with the machine, its
load and every commit. So README.md and ``docs/*.md`` state a measured duration or rate as a
range (``20–35 s``) in a paragraph that names the machine it came from (``on 2 CPU cores``), and
state no test tally at all (pytest prints its own). The exceptions are benchmark records (one run
of a command the page shows, its machine and load stated, read row against row), listed in
``RECORDS`` with the reason; an entry that no longer matches a paragraph that needs it fails, so
the list cannot rot. A sample output that shows timings says which machine printed it.

The folders the docs' commands write into (``--output_path``, ``results_root=``) are in
``.gitignore``, so running an example leaves ``git status`` clean.

No file of the project names a path under a ``shared/`` folder next to the repository, nor cites
the team's private notes on other projects' code: a user's clone has neither, so a test reading them skips and a
doc citing them sends the reader nowhere. Cite the public source instead (the official repository
at its commit, file and function; the paper's section; our own docs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\n.*?^```\n?", re.M | re.S)

NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:ms|s|sec|min|minutes?|seconds?|hours?|h)"
RATE_UNIT = r"(?:items?|it|requests?|samples?|tokens?|frames?)/s"
# A measured duration or rate: a number and its unit (and ``18 min 13 s`` is one figure).
FIGURE = re.compile(rf"(?<![\w.@/-])({NUMBER})\s?(?:{UNIT}|{RATE_UNIT})(?![\w/])")
# A range: ``20–35 s``, ``20-35 minutes``, ``0.7–1.1 s``, ``20 to 35 s``.
RANGE = re.compile(rf"{NUMBER}\s?(?:{UNIT}\s?)?(?:–|-|to)\s?{NUMBER}\s?(?:{UNIT}|{RATE_UNIT})(?![\w/])")
# A test tally: ``1843 passed``, ``about 1,850 tests`` (not a sweep's ``2 skipped, 1 failed`` cells).
TALLY = re.compile(rf"(?<![\w.])({NUMBER})\s+(?:tests?|passed|xfailed|xpassed)\b")
# The machine a figure came from.
MACHINE = re.compile(r"\b\d+-core\b|\b\d+ (?:CPU )?cores?\b|\b(?:H100|H200|A100|L40S?)\b")

# Benchmark records: single runs of a command the page shows, with the machine and the load
# stated, to compare rows with each other (not a promise of how long your run takes); and
# settings that are not measurements.
RECORDS = {
    ("docs/development.md", "Stages beside the main run, measured later that night"):
        "single fresh-clone runs of each arrangement on 2 CPU cores, stated as such, with the hour's drift",
    ("docs/development.md", "Where the work goes, measured again later that day"):
        "CPU logs of two main runs and single runs of the three stages alone, on 2 CPU cores, stated",
    ("docs/vllm.md", "**Pruning pays at every load here.**"):
        "make bench-serve record: the one run of the table above it, on 2 CPU cores",
    ("docs/baselines.md", "V-CAST 6 ms; random / uniform"):
        "bench-baselines record: one run per method on the stated tensor and 2-core CPU",
    ("docs/baselines.md", "which gives the same bits (400/400"):
        "FastVID before/after record of the same benchmark, machine and loads stated",
    ("docs/baselines.md", "On i.i.d. tokens (`--clip noise`"):
        "a bench-baselines record under stated load, quoted to show it is noise",
    ("docs/models.md", "At the former default of 256 px"):
        "bench_prefill records (ratios are the claim; the times are the runs'), machine stated above",
    ("docs/development.md", "| arch / size | text LM"):
        "the tiny/bench checkpoints' forward times, medians of 5 on 2 CPU cores (how they compare)",
    ("docs/development.md", "**Timings** are medians of 5"):
        "how the checkpoint table's times were taken, on the machine of its header",
    ("docs/development.md", "The bench rows were re-measured"):
        "the checkpoint table's former times, a record of the same benchmark",
    ("docs/harness.md", "`hydra/launcher=slurm_h100`"): "12 h is the launcher's SLURM time limit, a setting",
    ("docs/gpu.md", "| `pipeline` | where an evaluation's"):
        "the pipeline part's clips (20 s long): a setting of the kit, not a measurement",
    ("docs/gpu.md", "One NVIDIA H100 80GB HBM3"):
        "the kit's two runs on one H100, machine and versions stated; 8 minutes is the kit's budget",
    ("docs/gpu.md", "In the H100 run"):
        "figures of the kit's H100 runs (raw files in docs/gpu-runs/), read against each other and the paper's",
    ("README.md", "**What the demo shows.**"):
        "the demo model's one training run (make demo-model), its time recorded in its training.json",
}
# Sample outputs (code blocks without a language) that show timings: the paragraph right above
# names the machine.
TIMED_OUTPUT = re.compile(r"items_per_s|_s\b|\bms\b|ms@\d")


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def _paragraphs(text: str) -> list[str]:
    """Prose paragraphs without the code blocks; each list item is its own paragraph."""
    prose = FENCE.sub("\n\n", text)
    found = []
    for block in re.split(r"\n\s*\n", prose):
        found += [item.strip() for item in re.split(r"\n(?=[-*] )", block) if item.strip()]
    return found


def figure_problems(name: str, text: str, records: dict = RECORDS) -> tuple[list[str], set]:
    """What a page states wrongly (see the module docstring), and the RECORDS entries it used."""
    problems, used = [], set()
    for paragraph in _paragraphs(text):
        flat = " ".join(paragraph.split())
        for tally in TALLY.finditer(flat):
            problems.append(f"{name}: a test tally drifts with every commit: ...{tally.group(0)}...")
        figures = [m.group(0) for m in FIGURE.finditer(RANGE.sub("", flat))]
        ranges = RANGE.findall(flat)
        if not figures and not ranges:
            continue
        record = [key for key in records if key[0] == name and key[1] in paragraph]
        if record:
            used.update(record)
            continue
        if figures:
            problems.append(f"{name}: a single measured figure, give a range and the machine: {figures} in "
                            f"{flat[:160]!r}")
        elif not MACHINE.search(flat):
            problems.append(f"{name}: measured {ranges} without the machine it came from: {flat[:160]!r}")
    return problems, used


def timed_output_problems(name: str, text: str) -> list[str]:
    problems = []
    for block in FENCE.finditer(text):
        if not block["lang"] and TIMED_OUTPUT.search(block.group(0)):
            before = _paragraphs(text[:block.start()])[-1]
            if not MACHINE.search(" ".join(before.split())):
                problems.append(f"{name}: sample output with timings, and the paragraph above does not say "
                                f"which machine printed it: {before[-160:]!r}")
    return problems


def test_measured_figures_are_ranges_with_their_machine() -> None:
    problems, used = [], set()
    for page in PAGES:
        found, records = figure_problems(_name(page), page.read_text(encoding="utf-8"))
        problems += found
        used |= records
    assert problems == [], "\n".join(problems)
    assert used == set(RECORDS), f"RECORDS entries that match no paragraph with figures: {set(RECORDS) - used}"


def test_sample_outputs_with_timings_name_their_machine() -> None:
    problems = []
    for page in PAGES:
        problems += timed_output_problems(_name(page), page.read_text(encoding="utf-8"))
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("text, bad", [
    ("On 2 CPU cores, `make test` runs about 19 minutes after the install.", True),
    ("On 2 CPU cores, `make test` runs 18–35 minutes after the install.", False),
    ("`make test` runs 18–35 minutes after the install.", True),  # no machine
    ("pytest took 18 min 13 s (1843 passed, 5 skipped) on a 2-core CPU.", True),
    ("`pytest`: about 1,850 tests.", True),
    ("each cell about 12 s here", True),
    ("2.9–5.2 items/s on 2 CPU cores", False),
    ("the demo shows 11.7 items/s", True),
    ("24 cells at r = 0.25, 16 frames, 12 questions, 7 GB", False),
])
def test_the_figure_rule(text: str, bad: bool) -> None:
    assert bool(figure_problems("x.md", text, records={})[0]) == bad


OUTPUT = re.compile(r"(?:--output_path[ =]|results_root=)(\S+)")


def _ignored(folder: str, patterns: list[str]) -> bool:
    """Whether ``.gitignore`` ignores a top-level folder (its name, with or without slashes, or ``name/*``)."""
    top = folder.strip("/").split("/")[0]
    return any(p.strip("/").removesuffix("/*") == top for p in patterns if p and not p.startswith(("#", "!")))


def test_docs_commands_write_into_ignored_folders() -> None:
    patterns = [line.strip() for line in (REPO / ".gitignore").read_text(encoding="utf-8").splitlines()]
    unignored = []
    for page in PAGES:
        for block in FENCE.finditer(page.read_text(encoding="utf-8")):
            for folder in OUTPUT.findall(block.group(0)):
                if not folder.startswith(("/", "$", "<", "{")) and not _ignored(folder, patterns):
                    unignored.append(f"{_name(page)}: {folder}")
    assert unignored == [], f"outputs of the docs' commands that git would show: {unignored}"


def test_the_ignore_rule() -> None:
    assert _ignored("runs/", ["runs/"]) and _ignored("results/demo", ["results/*", "!results/README.md"])
    assert not _ignored("runs/", ["results/*", "# runs/"]) and not _ignored("out", ["outputs/"])


# A folder named shared as a path (after ``../``, before ``/<file>``, a quoted name joined with
# ``/`` in Python), or a file called "the shared <name>.csv" as if the reader had it.
SHARED_PATH = re.compile(r"""(?<![\w-])shared/[\w.]|["']shared["']\s*/|/\s*["']shared["']"""
                         r"""|\bshared\s+`*[\w.-]+\.(?:csv|tex|md|py|json|yaml)\b""")
SCANNED = ("README.md", "Makefile", "pyproject.toml", ".gitignore", ".ci", "docs", "configs", "tests", "vcast",
           "scripts", "baselines", "results/README.md")
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg", ".ini", ".json", ".jsonl", ".csv",
        ".tex", ""}


def _scanned_files():
    for entry in SCANNED:
        path = REPO / entry
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            parts = file.relative_to(REPO).parts
            if file.suffix in TEXT and "__pycache__" not in parts and "data" not in parts:
                yield file


# The private notes by file name, or cited by their collective name (each written split, so that
# this file matches none of them itself).
DESIGN_NOTE = re.compile("|".join(("reference" + "_methods", "inllm" + "_methods", "lmms_eval_and" + "_transformers",
                                   r"\bARCHITECTURE\.md", r"\bdesign " + "notes?\\b")))


def test_no_file_names_a_shared_folder() -> None:
    found = []
    for file in _scanned_files():
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if SHARED_PATH.search(line) or DESIGN_NOTE.search(line):
                found.append(f"{file.relative_to(REPO)}:{number}: {line.strip()}")
    assert found == [], "\n".join(found)


@pytest.mark.parametrize("line, named", [  # written with {s}, so that this file names no such path
    ('CSV = REPO.parent / "{s}" / "paper" / "paper_tables.csv"', True),
    ("# from ../{s}/paper tables", True),
    ("see ``{s}/design/reference{u}methods.md`` section 3.3", True),
    ("read from `vcast/report/paper_tables.csv` (the {s} `paper_tables.csv` plus the rows", True),
    ("The {s} half of vcast's plugins, {s} by every family ({s} vector + noise, {s} items).", False),
    ("(reference{u}methods.md section 7.1; LLaVA-OV only)", True),
    ("as described in inllm{u}methods.md section 4", True),
    ("with the section of the design {n} that describes it", True),
    ("the design of the registry keeps {n} short", False),
])
def test_the_shared_path_rule(line: str, named: bool) -> None:
    text = line.format(s="shared", u="_", n="notes")
    assert bool(SHARED_PATH.search(text) or DESIGN_NOTE.search(text)) == named
