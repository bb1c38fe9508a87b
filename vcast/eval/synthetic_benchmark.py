"""``vcast_synth``: an offline video benchmark of brief events, written deterministically.

Real video benchmarks need downloads; this one is generated on the spot, so the lmms-eval harness
can be exercised end to end offline. Each item is a short mp4 clip (128x128, 8 fps, 20 to 64
frames) over a gently drifting grey or tinted texture, with a 4-way multiple-choice question
whose answer is decided by a few frames only:

* ``appear``: a coloured square or disc is visible for 2 to 4 frames; which colour was it?
* ``cut``: the background colour (and texture) changes once, at a seeded frame; which colour is
  the background after the cut? The colour before the cut is always one of the distractors.
* ``count``: a coloured square or disc flashes N times (N in 1..4, 2 to 4 frames each, at least
  3 frames apart); how many times?

Every category has at least one clip shorter than 32 frames, so the harness meets videos with
fewer frames than it asks for, and (with two items or more) one of 48 frames or more. Answer
letters are balanced within a category (a seeded permutation of A, B, C, D, A, ...). The same
seed gives the same jsonl and the same decoded frames.

Layout written by :func:`write_benchmark`::

    <out_dir>/manifest.json          what was asked for (seed, items per category, version)
    <out_dir>/vcast_synth.jsonl      one question per line, see ``Item.record``
    <out_dir>/videos/<question_id>.mp4
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vcast.atomic_files import swap_in_dir
from vcast.eval.video import pick_codec, write_mp4

logger = logging.getLogger(__name__)

# Bump whenever the pixels or the questions change, so stale data folders are refused.
GENERATOR_VERSION = 1

DEFAULT_DATA_DIR = Path(__file__).parent / "tasks" / "vcast_synth" / "data"
# The held-out evaluation set (task vcast_synth_heldout): the demo's items, from a seed no training
# stream uses (vcast.demo_model.recipe draws its clips from seeds >= 10_000).
HELDOUT_DATA_DIR = Path(__file__).parent / "tasks" / "vcast_synth" / "data_heldout"
HELDOUT_SEED = 2026
HELDOUT_ITEMS_PER_CATEGORY = 100
JSONL_NAME = "vcast_synth.jsonl"
MANIFEST_NAME = "manifest.json"
VIDEOS_DIR = "videos"

CATEGORIES: tuple[str, ...] = ("appear", "cut", "count")
LETTERS = "ABCD"
HEIGHT, WIDTH = 128, 128
FPS = 8
MIN_FRAMES, MAX_FRAMES = 20, 64
SHORT_FRAMES = 32  # every category gets at least one clip with fewer frames than this ...
LONG_FRAMES = 48  # ... and, with two items or more, one with at least this many

# Saturated and far apart in RGB, so each survives yuv420p and its name is unambiguous; the grey
# background has no saturation at all, which is what makes the events findable from the pixels.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 180, 60),
    "blue": (40, 90, 230),
    "yellow": (230, 210, 40),
    "purple": (150, 60, 210),
    "cyan": (40, 200, 220),
}
GREY = 120
TEXTURE_AMPLITUDE = 18.0  # grey levels, peak; gentle next to the events' saturation of ~150+

APPEAR_QUESTION = "Which colour was the object that briefly appeared?"
CUT_QUESTION = (
    "The video contains one scene cut, where the background changes. "
    "What colour is the background after the scene cut?"
)
COUNT_QUESTION = "How many times does the {colour} {shape} flash in the video?"


@dataclass(frozen=True)
class Item:
    """One question with its clip.

    ``frames``: ``[T, H, W, 3]`` uint8 RGB. ``event_frames``: the frame indices where the object is
    visible (``appear``, ``count``) or ``[cut]``, the first frame after the scene cut (``cut``).
    """

    question_id: str
    category: str
    question: str
    options: tuple[str, ...]
    answer: str
    frames: np.ndarray
    event_frames: tuple[int, ...]

    def record(self) -> dict:
        """The jsonl line (the video path is relative to the benchmark folder)."""
        num_frames = int(self.frames.shape[0])
        return {
            "question_id": self.question_id,
            "video": f"{VIDEOS_DIR}/{self.question_id}.mp4",
            "category": self.category,
            "question": self.question,
            "options": list(self.options),
            "answer": self.answer,
            "num_frames": num_frames,
            "fps": FPS,
            "duration": num_frames / FPS,
            "event_frames": list(self.event_frames),
        }


# ---------------------------------------------------------------------------------------------
# Pixels
# ---------------------------------------------------------------------------------------------


def _texture(rng: np.random.Generator, num_frames: int) -> np.ndarray:
    """A drifting sum of three sine gratings, zero-mean, peak ``TEXTURE_AMPLITUDE``. [T, H, W] float32"""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    t = np.arange(num_frames, dtype=np.float32)[:, None, None]
    field = np.zeros((num_frames, HEIGHT, WIDTH), dtype=np.float32)
    for _ in range(3):
        angle = rng.uniform(0, 2 * np.pi)
        cycles = rng.uniform(1.0, 3.0)  # per frame width: smooth, so it compresses well
        speed = rng.uniform(0.05, 0.25)  # radians per frame: a slow drift
        phase = rng.uniform(0, 2 * np.pi)
        k = np.float32(2 * np.pi * cycles / WIDTH)
        along = np.cos(angle) * x + np.sin(angle) * y
        field += np.sin(k * along[None] + np.float32(speed) * t + np.float32(phase))
    return field * np.float32(TEXTURE_AMPLITUDE / 3)


def _background(rng: np.random.Generator, num_frames: int, colour: tuple[int, int, int] | None = None) -> np.ndarray:
    """Grey (or ``colour``) plus a drifting luminance texture. [T, H, W, 3] uint8"""
    base = np.array(colour if colour is not None else (GREY, GREY, GREY), dtype=np.float32)
    pixels = base + _texture(rng, num_frames)[..., None]  # same offset on every channel: no tint
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)


def _object_mask(rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """A square or disc, 24 to 36 px, at a random place away from the border. ([H, W] bool, shape name)"""
    shape = "square" if rng.random() < 0.5 else "disc"
    size = 2 * int(rng.integers(12, 19))  # even sizes and corners line up with yuv420p's 2x2 chroma
    top = 2 * int(rng.integers(4, (HEIGHT - size - 8) // 2 + 1))
    left = 2 * int(rng.integers(4, (WIDTH - size - 8) // 2 + 1))
    mask = np.zeros((HEIGHT, WIDTH), dtype=bool)
    if shape == "square":
        mask[top : top + size, left : left + size] = True
    else:
        y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
        centre = (size - 1) / 2
        mask = (y - top - centre) ** 2 + (x - left - centre) ** 2 <= (size / 2) ** 2
    return mask, shape


def _paint(frames: np.ndarray, mask: np.ndarray, colour: tuple[int, int, int], frame_ids: list[int]) -> None:
    """Paint ``colour`` into ``mask`` on ``frame_ids`` of ``frames`` [T, H, W, 3], in place."""
    for t in frame_ids:
        frames[t][mask] = colour


# ---------------------------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------------------------


def _colour_options(
    rng: np.random.Generator, answer: str, answer_index: int, must_include: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Four lettered colour options with ``answer`` at ``answer_index`` and ``must_include`` among the rest."""
    others = [name for name in PALETTE if name != answer and name not in must_include]
    picked = list(must_include) + [others[i] for i in rng.permutation(len(others))[: 3 - len(must_include)]]
    picked = [picked[i] for i in rng.permutation(3)]
    picked.insert(answer_index, answer)
    return tuple(f"{LETTERS[i]}. {name}" for i, name in enumerate(picked))


def _make_appear(rng: np.random.Generator, question_id: str, num_frames: int, answer_index: int) -> Item:
    frames = _background(rng, num_frames)
    mask, _ = _object_mask(rng)
    colour = str(rng.choice(list(PALETTE)))
    length = int(rng.integers(2, 5))
    start = int(rng.integers(1, num_frames - length))  # never on the first or last frame
    event = list(range(start, start + length))
    _paint(frames, mask, PALETTE[colour], event)
    options = _colour_options(rng, colour, answer_index)
    return Item(question_id, "appear", APPEAR_QUESTION, options, LETTERS[answer_index], frames, tuple(event))


def _make_cut(rng: np.random.Generator, question_id: str, num_frames: int, answer_index: int) -> Item:
    names = list(PALETTE)
    before, after = (names[i] for i in rng.permutation(len(names))[:2])
    cut = int(rng.integers(round(0.25 * num_frames), round(0.75 * num_frames) + 1))
    # Two independent textures: a new scene, not just a recolouring.
    frames = np.concatenate(
        [_background(rng, cut, PALETTE[before]), _background(rng, num_frames - cut, PALETTE[after])]
    )
    options = _colour_options(rng, after, answer_index, must_include=(before,))
    return Item(question_id, "cut", CUT_QUESTION, options, LETTERS[answer_index], frames, (cut,))


def _flash_starts(rng: np.random.Generator, num_frames: int, lengths: list[int], min_gap: int = 3) -> list[int]:
    """Start frames for flashes of ``lengths``, at least ``min_gap`` apart and 1 from either end."""
    slack = num_frames - sum(lengths) - min_gap * (len(lengths) - 1) - 2
    assert slack >= 0, (num_frames, lengths)
    # Spread the slack over the len+1 spaces (before, between, after) at random.
    extra = rng.multinomial(slack, np.full(len(lengths) + 1, 1 / (len(lengths) + 1)))
    starts, t = [], 1 + int(extra[0])
    for i, length in enumerate(lengths):
        starts.append(t)
        t += length + min_gap + int(extra[i + 1])
    return starts


def _make_count(rng: np.random.Generator, question_id: str, num_frames: int, answer_index: int) -> Item:
    flashes = answer_index + 1  # options are 1..4 in order, so the letter fixes the count
    frames = _background(rng, num_frames)
    mask, shape = _object_mask(rng)
    colour = str(rng.choice(list(PALETTE)))
    lengths = [int(v) for v in rng.integers(2, 5, size=flashes)]
    while sum(lengths) + 3 * (flashes - 1) + 2 > num_frames:  # short clips: shorten the longest
        lengths[int(np.argmax(lengths))] -= 1
    event = [t for start, length in zip(_flash_starts(rng, num_frames, lengths), lengths)
             for t in range(start, start + length)]
    _paint(frames, mask, PALETTE[colour], event)
    options = tuple(f"{LETTERS[i]}. {i + 1}" for i in range(4))
    question = COUNT_QUESTION.format(colour=colour, shape=shape)
    return Item(question_id, "count", question, options, LETTERS[answer_index], frames, tuple(event))


_MAKERS = {"appear": _make_appear, "cut": _make_cut, "count": _make_count}


def _plan(rng: np.random.Generator, items_per_category: int) -> tuple[list[int], list[int]]:
    """Clip lengths and balanced answer indices for one category."""
    answers = [int(a) for a in rng.permutation(np.arange(items_per_category) % len(LETTERS))]
    lengths = [int(v) for v in rng.integers(MIN_FRAMES, MAX_FRAMES + 1, size=items_per_category)]
    order = [int(i) for i in rng.permutation(items_per_category)]
    lengths[order[0]] = int(rng.integers(MIN_FRAMES, SHORT_FRAMES))
    if items_per_category > 1:  # and one long clip, so both regimes are always present
        lengths[order[1]] = int(rng.integers(LONG_FRAMES, MAX_FRAMES + 1))
    return lengths, answers


def iter_items(seed: int = 0, items_per_category: int = 4) -> Iterator[Item]:
    """All items, category by category (``appear_000``, ..., ``cut_000``, ..., ``count_000``, ...).

    Each category has its own ``SeedSequence([seed, category index])``; child 0 plans the clip
    lengths and answer letters, child ``i + 1`` draws item ``i``, so an item's content does not
    depend on the other categories.
    """
    _validate(seed, items_per_category)
    for cat_index, category in enumerate(CATEGORIES):
        children = np.random.SeedSequence([seed, cat_index]).spawn(items_per_category + 1)
        lengths, answers = _plan(np.random.default_rng(children[0]), items_per_category)
        for i in range(items_per_category):
            rng = np.random.default_rng(children[i + 1])
            yield _MAKERS[category](rng, f"{category}_{i:03d}", lengths[i], answers[i])


def _validate(seed: int, items_per_category: int) -> None:
    for name, value, low in (("seed", seed, 0), ("items_per_category", items_per_category, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def _request(seed: int, items_per_category: int) -> dict:
    """The manifest keys that must match for an existing folder to be reused."""
    return {"generator_version": GENERATOR_VERSION, "seed": seed, "items_per_category": items_per_category}


def _existing_problem(out_dir: Path, request: dict) -> str | None:
    """Why ``out_dir`` cannot be reused for ``request`` (``None``: it can)."""
    manifest_path = out_dir / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        return f"{out_dir} exists but has no {MANIFEST_NAME} (not a vcast_synth benchmark folder)"
    except (OSError, json.JSONDecodeError) as err:
        return f"{manifest_path} is unreadable ({err})"
    diffs = [f"{key}: found {manifest.get(key)!r}, requested {value!r}"
             for key, value in request.items() if manifest.get(key) != value]
    if diffs:
        return f"{out_dir} holds a different benchmark ({'; '.join(diffs)})"
    jsonl = out_dir / JSONL_NAME
    if not jsonl.is_file():
        return f"{out_dir} is incomplete: {JSONL_NAME} is missing"
    try:
        videos = [out_dir / json.loads(line)["video"] for line in jsonl.read_text().splitlines()]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        return f"{jsonl} is unreadable ({err!r})"
    missing = [video for video in videos if not video.is_file()]
    if missing or len(videos) != manifest.get("num_items"):
        return f"{out_dir} is incomplete ({len(missing)} missing videos, {len(videos)} jsonl lines)"
    return None


def _generate(tmp: Path, seed: int, items_per_category: int) -> int:
    """Write the videos, the jsonl and the manifest into ``tmp``; returns the item count."""
    codec = pick_codec()
    (tmp / VIDEOS_DIR).mkdir()
    records = []
    for item in iter_items(seed, items_per_category):
        write_mp4(tmp / VIDEOS_DIR / f"{item.question_id}.mp4", item.frames, FPS, codec)
        records.append(item.record())
        logger.debug("wrote %s (%d frames)", item.question_id, item.frames.shape[0])
    with open(tmp / JSONL_NAME, "w") as f:
        f.writelines(json.dumps(record, sort_keys=True) + "\n" for record in records)
    manifest = {**_request(seed, items_per_category), "num_items": len(records), "width": WIDTH,
                "height": HEIGHT, "fps": FPS, "codec": codec, "categories": list(CATEGORIES)}
    # The manifest last: a folder with a manifest is a complete one.
    (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return len(records)


def write_benchmark(
    out_dir: str | os.PathLike[str] = DEFAULT_DATA_DIR,
    *,
    seed: int = 0,
    items_per_category: int = 4,
    overwrite: bool = False,
) -> Path:
    """Write the benchmark into ``out_dir`` and return the path of its jsonl.

    The folder is built beside ``out_dir`` and renamed into place, so a failure leaves nothing
    half-written. If ``out_dir`` already holds the same request (seed, items per category,
    generator version) and is complete, nothing is rewritten. Any other existing, non-empty
    ``out_dir`` raises ``ValueError`` naming the difference. ``overwrite=True`` always writes
    afresh and replaces whatever ``out_dir`` held.
    """
    _validate(seed, items_per_category)
    out = Path(out_dir).expanduser().resolve()
    request = _request(seed, items_per_category)
    if out.exists() and not overwrite:
        problem = _existing_problem(out, request)
        if problem is None:
            logger.info("%s is up to date (seed %d, %d items per category)", out, seed, items_per_category)
            return out / JSONL_NAME
        if not (out.is_dir() and not any(out.iterdir())):  # an empty folder is simply filled
            raise ValueError(f"{problem}; pass overwrite=True (--overwrite) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would otherwise become the data folder's mode
    try:
        count = _generate(tmp, seed, items_per_category)
        if not overwrite and out.exists() and _existing_problem(out, request) is None:
            # A concurrent caller (e.g. parallel sweep jobs) installed the same benchmark: keep it.
            shutil.rmtree(tmp, ignore_errors=True)
            logger.info("%s was written meanwhile by another process; keeping it", out)
            return out / JSONL_NAME
        swap_in_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("wrote %d items to %s", count, out)
    return out / JSONL_NAME
