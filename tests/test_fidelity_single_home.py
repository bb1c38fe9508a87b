"""Measured agreement with the official releases has one home: ``docs/fidelity.md``.

The figures of the comparisons with the released codes (``fp32 120/120, bf16 120/120 exact``,
``kept sets 351/351``, ``bit-equal in 40/40``, the scratch scripts that produced them) are stated
in ``docs/fidelity.md`` only: a second copy in a docstring would drift from the first. A method's
docstring says what was compared and points to its section::

    Measured agreement with the release: docs/fidelity.md, section "FastV".

This file fails when a docstring, string or comment under ``baselines/`` or ``vcast/`` states an
agreement count (``N/M`` next to fp32 / bf16 / exact / bit-equal / kept sets / cases ...), when a
pointer names a section the page does not have, and when a section of the page's "Measured
agreement, method by method" is pointed to by no docstring. Fractions that are not agreement
figures (``1/2 Tokens`` in a paper title, scales ``1/8, 1/4``, ``0/0 is NaN``, ``54/64``,
``20/30/40/50``) are not counts."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("baselines", "vcast")
FIDELITY = REPO / "docs" / "fidelity.md"
PER_METHOD = "Measured agreement, method by method"

NUMBER = r"\d{1,3}(?:,\d{3})+|\d+"  # 120, 2000, 480,000
# ``N/M`` on its own: not one link of a chain (``20/30/40/50``, ``0.10/0.15``), a path or a date.
FRACTION = re.compile(rf"(?<![\w./,])(?P<n>{NUMBER})/(?P<m>{NUMBER})(?![\w/]|[.,]\d)")
# Words that make a count an agreement figure when they stand near it.
AGREEMENT = re.compile(r"\b(?:fp32|fp16|bf16|float32|exact|bit-equal|bit for bit|bitwise|kept sets?|cases?|"
                       r"identical|agree(?:s|d)?|match(?:es|ed)?|per (?:variant and )?dtype|label sequences)\b", re.I)
WINDOW = 80  # characters either side of the count, in whitespace-normalised text
# ``42 of 480,000 random attention rows``, ``1 of 496,144 probabilities``, ``in 6 of 200 cases``.
OF_COUNT = re.compile(rf"\b(?:{NUMBER}) of (?:{NUMBER})\s+(?:[\w-]+\s+){{0,2}}(?:cases|rows|probabilities|memberships)\b")
POINTER = re.compile(r'docs/fidelity\.md,\s+section\s+"(?P<name>[^"]+)"')
HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<name>.+?)\s*$", re.M)


def _value(text: str) -> int:
    return int(text.replace(",", ""))


def agreement_counts(text: str) -> list[str]:
    """The agreement figures a docstring or comment states (whitespace normalised)."""
    flat = " ".join(text.split())
    found = []
    for match in FRACTION.finditer(flat):
        n, m = _value(match["n"]), _value(match["m"])
        # Not a count of cases: more than all, out of fewer than 2, or a plain fraction (1/2, 1/8, 3/4).
        if n > m or m < 2 or (n < m and m < 10):
            continue
        around = flat[max(0, match.start() - WINDOW):match.end() + WINDOW]
        if AGREEMENT.search(around):
            found.append(match.group(0))
    found += [match.group(0) for match in OF_COUNT.finditer(flat)]
    return found


def _texts(source: str):
    """(line, text) of every string literal and comment of a Python source."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            yield token.start[0], token.string


def _python_files():
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                yield path


FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _headings() -> list[tuple[int, str]]:
    """(level, name) of the page's headings, in order (code blocks' ``#`` lines are not headings)."""
    page = FENCE.sub("", FIDELITY.read_text(encoding="utf-8"))
    return [(len(m["level"]), m["name"]) for m in HEADING.finditer(page)]


def _pointers() -> list[tuple[str, str]]:
    """(file:line, section name) of every pointer into docs/fidelity.md under the scanned folders."""
    found = []
    for path in _python_files():
        for line, text in _texts(path.read_text(encoding="utf-8")):
            for match in POINTER.finditer(" ".join(text.split())):
                found.append((f"{path.relative_to(REPO)}:{line}", match["name"]))
    return found


def test_no_docstring_or_comment_states_an_agreement_count() -> None:
    stated = []
    for path in _python_files():
        for line, text in _texts(path.read_text(encoding="utf-8")):
            counts = agreement_counts(text)
            if counts:
                stated.append(f"{path.relative_to(REPO)}:{line}: {counts}")
    assert stated == [], ("measured agreement belongs in docs/fidelity.md; point to its section instead:\n"
                          + "\n".join(stated))


def test_every_pointer_names_a_section_of_the_fidelity_page() -> None:
    pointers = _pointers()
    assert len(pointers) >= 15, "the methods' docstrings point to their sections of docs/fidelity.md"
    names = {name for _, name in _headings()}
    missing = [f"{where}: {name!r}" for where, name in pointers if name not in names]
    assert missing == [], "\n".join(missing)


def test_every_per_method_section_is_pointed_to() -> None:
    headings = _headings()
    start = [i for i, (_, name) in enumerate(headings) if name == PER_METHOD]
    assert len(start) == 1, f"docs/fidelity.md has one section {PER_METHOD!r}"
    level = headings[start[0]][0]
    sections = []
    for depth, name in headings[start[0] + 1:]:
        if depth <= level:
            break
        sections.append(name)
    assert sections, f"{PER_METHOD!r} has one subsection per method"
    pointed = {name for _, name in _pointers()}
    assert [name for name in sections if name not in pointed] == []


@pytest.mark.parametrize("text, counts", [
    # The figures as the docstrings stated them before they moved to docs/fidelity.md.
    ("near-static tokens, GQA or not; scratch ``fastv/compare.py``): kept sets fp32 120/120 and bf16\n"
     "120/120 exact", ["120/120", "120/120"]),
    ("``paper`` on the same cases\n100/120 (fp32: the 20 halves) and 93/120 (bf16).", ["100/120", "93/120"]),
    ("fp32 351/351, bf16 349/349, fp16 351/351 kept sets and counts exact", ["351/351", "349/349", "351/351"]),
    ("exact (and 5/5 per dtype at LLaVA-OneVision's size, T 32, P 196, D 128), ``refine_clusters``\n"
     "2000/2000 label sequences", ["5/5", "2000/2000"]),
    ("tokens, written to the same slots, without DeepStack; 110/110 exact per dtype, docs/fidelity.md).",
     ["110/110"]),
    ("28-layer Qwen2 stack: 40/40 identical kept sets in fp32 and bf16", ["40/40"]),
    ("synthetic videos: 326/336 in fp32 and bf16, the 10 misses all at P = 1", ["326/336"]),
    ("fp32 200/200 + 100/100 edge, bf16 200/200 + 100/100 edge", ["200/200", "100/100", "200/200", "100/100"]),
    ("bf16 319/320 rows bit-equal (1 of 496,144 probabilities differs", ["319/320", "1 of 496,144 probabilities"]),
    ("on CPU the two differ in the last bit in 42 of 480,000 random attention rows", ["42 of 480,000 random attention rows"]),
    # Fractions that are not agreement figures.
    ('Paper: "An Image is Worth 1/2 Tokens After Layer 2: Plug-and-Play Inference Acceleration for', []),
    ("Gaussian similarity ``S(x, c) = sum_{a in 1/8, 1/4, 1/2, 1, 2} exp(-|x - c|^2 / 2a)``", []),
    ("* A window of one frame has no static location (the official 0/0 is NaN, and NaN > tau is False).", []),
    ("``floor((j + 1/2) * P / b)`` for ``j = 0 .. b-1`` (the centres of ``b`` equal slices of the frame's "
     "raster order; computed exactly in integers", []),
    ("Defaults: ``dominant_ratio = 54/64``; ``spatial_tokens = None`` -> ``round(r * P)``", []),
    ("SPATIAL_TOKENS = 20/30/40/50 for r = 0.10/0.15/0.20/0.25 at P = 196 (``round`` gives 20/29/39/49)", []),
    ("McNemar's exact test, two-sided: ``min(1, 2 * P[X <= min(b, c)])`` for ``X ~ Binomial(b + c, 1/2)``", []),
    ("whole batch row's matrix for the densest (a 0/1 mask in the tokens' dtype, as released).", []),
    ("P=196, r=0.25 -> the other 23 keep n=49: 2891 of 6272 tokens (46.1%)", []),
    ("Measured agreement with the release: docs/fidelity.md, section \"FastV\".", []),
])
def test_the_agreement_count_rule(text: str, counts: list[str]) -> None:
    assert agreement_counts(text) == counts


def test_the_pointer_rule() -> None:
    text = 'agreement with the release: docs/fidelity.md,\n    section "Qwen2.5-VL: what each\n    release runs there".'
    assert [m["name"] for m in POINTER.finditer(" ".join(text.split()))] == ["Qwen2.5-VL: what each release runs there"]
