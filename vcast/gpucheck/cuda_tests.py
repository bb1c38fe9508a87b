"""The test suite's CUDA-only tests (marker ``gpu``), run with pytest in a subprocess.

The files are found by their marker (``pytest.mark.gpu`` in ``tests/test_*.py``), so a new CUDA
test is picked up without a change here. Without CUDA they would only skip, so the kit's CPU mode
does not run them and says so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from vcast.gpucheck.environment import REPOSITORY
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report

TESTS = REPOSITORY / "tests"
MARKER = "mark.gpu"


def gpu_test_files(tests: Path = TESTS) -> list[Path]:
    """``tests/test_*.py`` files that hold a test marked ``gpu``."""
    return sorted(path for path in tests.glob("test_*.py") if MARKER in path.read_text(encoding="utf-8"))


def _summary(output: str) -> str:
    """pytest's closing line (``N passed, M skipped in Xs``), or the last line."""
    lines = [line.strip("= ").strip() for line in output.splitlines() if line.strip()]
    closing = [line for line in lines
               if re.search(r"\b(passed|failed|skipped|deselected|error|no tests ran)\b.* in [\d.]+s", line)]
    return closing[-1] if closing else (lines[-1] if lines else "(no output)")


def run(report: Report, cuda: bool, timeout_s: float = 300) -> None:
    """``cuda-tests``: pass when pytest passes (skips listed with their reasons), fail otherwise."""
    files = gpu_test_files() if TESTS.is_dir() else []
    if not files:
        report.check("cuda-tests", SKIPPED, f"no test marked gpu under {TESTS} (not a repository checkout?)")
        return
    names = ", ".join(path.name for path in files)
    if not cuda:
        report.check("cuda-tests", SKIPPED, f"CPU mode: the CUDA-only tests of {names} need a GPU")
        return
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rs",
               *[str(path.relative_to(REPOSITORY)) for path in files]]
    report.log(f"cuda-tests: {' '.join(command[1:])}")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    pythonpath = [str(REPOSITORY), *filter(None, [env.get("PYTHONPATH")])]
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    try:
        done = subprocess.run(command, cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired as error:
        output = error.stdout or ""
        output = output.decode(errors="replace") if isinstance(output, bytes) else output
        report.notes["CUDA tests (pytest)"] = "```\n" + output[-4000:] + "\n```"
        report.check("cuda-tests", FAIL, f"pytest did not finish in {timeout_s:.0f} s")
        return
    output = done.stdout + done.stderr
    for line in output.splitlines():
        report.lines.append(f"    pytest | {line}")
    tail = "\n".join(output.splitlines()[-40:])
    report.notes["CUDA tests (pytest)"] = f"`{' '.join(command[1:])}` (exit {done.returncode})\n\n```\n{tail}\n```"
    summary = _summary(output)
    if done.returncode == 0:
        status = PASS if re.search(r"\d+ passed", summary) else SKIPPED
    elif done.returncode == 5:  # no test collected
        status = SKIPPED
    else:
        status = FAIL
    skips = sorted({m.group(1).strip() for m in re.finditer(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", output)})
    report.check("cuda-tests", status, f"{names}: {summary}" + (f"; skipped: {'; '.join(skips)}" if skips else ""))
