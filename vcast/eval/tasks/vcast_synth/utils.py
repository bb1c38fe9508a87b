"""lmms-eval hooks of the ``vcast_synth`` task: video path, prompt, answer parsing, accuracy.

Self-contained on purpose: lmms-eval imports this file by path (once per ``!function``), and the
data folder is found next to it, so a copy of the task folder works with its own ``data/``.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

# A fixed name: lmms-eval loads this file as a module called "utils".
logger = logging.getLogger("vcast.eval.tasks.vcast_synth")

DATA_DIR = Path(__file__).resolve().parent / "data"
JSONL = DATA_DIR / "vcast_synth.jsonl"
GENERATE_HINT = f"`python scripts/make_synthetic_benchmark.py --out {DATA_DIR}` (or `make synth-data`)"
# vcast_synth_heldout: the same questions, 100 per category from their own seed (the demo's set).
HELDOUT_DIR = Path(__file__).resolve().parent / "data_heldout"
HELDOUT_HINT = "`python scripts/make_synthetic_benchmark.py --heldout` (or `make synth-heldout`)"
METRIC = "vcast_synth_acc"
DEFAULT_POST_PROMPT = "\nAnswer with the option's letter from the given choices directly."

# A capital A-D with no letter or digit on either side: "B", "B.", "(B)", "[C]", "answer is D".
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])([A-D])(?![A-Za-z0-9])")
# "A" followed by a space and a word is the article ("A red square"), not an option.
_ARTICLE = re.compile(r"A\s+[A-Za-z]")
# The whole reply is one letter, any case, maybe wrapped or punctuated: "b", "(c)", "d.", "**A**".
_ONLY_LETTER = re.compile(r"[\s(\[*'\"]*([A-Da-d])[\s)\].:,*'\"]*")


def _video(data_dir: Path, doc: dict, hint: str) -> list[str]:
    path = data_dir / doc["video"]
    if not path.is_file():
        raise FileNotFoundError(f"vcast_synth video {path} is missing; generate the benchmark with {hint}")
    return [str(path)]


def _doc_to_visual(doc: dict) -> list[str]:
    """``[absolute mp4 path]``; raises ``FileNotFoundError`` with the fix if it is missing."""
    return _video(DATA_DIR, doc, GENERATE_HINT)


def _doc_to_visual_heldout(doc: dict) -> list[str]:
    """``doc_to_visual`` of ``vcast_synth_heldout`` (its videos are under ``data_heldout/``)."""
    return _video(HELDOUT_DIR, doc, HELDOUT_HINT)


# Each task's own hook: its task, data folder and how to make the data. lmms-eval imports this file for
# every task that names it and looks a task's hooks up only when that task is loaded (indexing the
# folder reads no hook), right before it reads the task's jsonl. So the data is checked there, in
# the module's __getattr__, not at import: a check at import named vcast_synth's missing data to a
# run that asked for vcast_synth_heldout alone.
_VISUAL_HOOKS = {
    "doc_to_visual": (_doc_to_visual, "vcast_synth", DATA_DIR, GENERATE_HINT),
    "doc_to_visual_heldout": (_doc_to_visual_heldout, "vcast_synth_heldout", HELDOUT_DIR, HELDOUT_HINT),
}


def __getattr__(name: str) -> Callable[[dict], list[str]]:  # the module's attribute hook (PEP 562)
    """``doc_to_visual`` (task ``vcast_synth``) or ``doc_to_visual_heldout`` (``vcast_synth_heldout``),
    after an ERROR naming the command that makes the task's data when its jsonl is missing (lmms-eval's
    own error would name a path relative to the working directory, after ~8 s of retries)."""
    if name not in _VISUAL_HOOKS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    hook, task, data_dir, hint = _VISUAL_HOOKS[name]
    jsonl = data_dir / JSONL.name
    if not jsonl.is_file():
        logger.error("%s: %s is missing; generate the benchmark with %s", task, jsonl, hint)
    return hook


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    """Question, the four options one per line, then the post prompt."""
    kwargs = lmms_eval_specific_kwargs or {}
    pre_prompt = kwargs.get("pre_prompt", "")
    post_prompt = kwargs.get("post_prompt", DEFAULT_POST_PROMPT)
    return f"{pre_prompt}{doc['question']}\n" + "\n".join(doc["options"]) + post_prompt


def parse_choice(response: str, options: Sequence[str] = ()) -> str:
    """The option letter a reply names, or ``""`` if none can be found.

    Rules, in order:

    1. the whole reply is a single letter A-D in either case, optionally wrapped in brackets,
       quotes or ``**`` and followed by punctuation: ``"b"``, ``"(C)"``, ``"D."``;
    2. otherwise the first capital A-D standing alone (no letter or digit either side), except an
       ``A`` followed by a space and a word, which is the article: ``"The answer is B"`` -> B,
       ``"(C) blue"`` -> C, ``"A. red"`` -> A, ``"A red square"`` -> no letter;
    3. otherwise, given the item's ``options`` (``"C. blue"``), a reply that is exactly one
       option's text, in any case, maybe with a final full stop: ``"blue"`` -> C, ``"3."`` -> C
       (VLMEvalKit's ``can_infer`` falls back to the option text the same way).

    Lowercase letters count only under rule 1, since "a" is far more often the article.
    """
    text = response.strip()
    whole = _ONLY_LETTER.fullmatch(text)
    if whole:
        return whole.group(1).upper()
    for match in _STANDALONE.finditer(text):
        if match.group(1) == "A" and _ARTICLE.match(text, match.start()):
            continue
        return match.group(1)
    said = text.rstrip(".").strip().lower()
    named = [option.split(". ", 1) for option in options]
    hits = [letter for letter, option_text in named if option_text.strip().lower() == said]
    return hits[0] if said and len(hits) == 1 else ""


def process_results(doc: dict, results: list[str]) -> dict[str, dict]:
    """Score one reply: 1.0 if its parsed letter is the answer, else 0.0 (unparsable included)."""
    pred = parse_choice(results[0] if results else "", doc["options"])
    return {
        METRIC: {
            "question_id": doc["question_id"],
            "category": doc["category"],
            "pred": pred,
            "answer": doc["answer"],
            "score": float(pred == doc["answer"]),
        }
    }


def aggregate_accuracy(results: list[dict]) -> float:
    """Accuracy in percent (0-100) over all items; per-category accuracy goes to the log."""
    if not results:
        return 0.0
    by_category: dict[str, list[float]] = defaultdict(list)
    for result in results:
        by_category[result["category"]].append(result["score"])
    for category, scores in sorted(by_category.items()):
        logger.info("vcast_synth %s: %.1f%% of %d", category, 100.0 * sum(scores) / len(scores), len(scores))
    return 100.0 * sum(r["score"] for r in results) / len(results)
