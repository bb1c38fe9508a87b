"""Training batches for the demo model, built exactly as the harness builds its inputs.

The prompt is the ``vcast_synth`` task's own ``doc_to_text`` (loaded from the task folder, as
lmms-eval loads it) inside the ``vcast_qwen3_vl`` plugin's chat (its default system prompt, the
video, then the text); the frames are the ones the plugin reads at the same frame count
(:func:`vcast.eval.video.linspace_indices` of :func:`vcast.eval.video.qwen_frame_count`); the reply
is the answer's option text (``" blue"``), which the task's parser reads as that option's letter.
"""

from __future__ import annotations

import functools
import importlib.util
from types import ModuleType
from typing import Any, Sequence

import numpy as np
import torch

from vcast.eval.run import TASKS_DIR
from vcast.eval.synthetic_benchmark import FPS, LETTERS, Item
from vcast.eval.video import linspace_indices, qwen_frame_count

SYSTEM_PROMPT = "You are a helpful assistant."  # vcast_qwen3_vl's default system_prompt
MAX_FLASHES = 4  # count's options are 1..4: the running-count head has classes 0..4
IGNORE = -100  # labels that carry no loss (transformers' ignore index)


@functools.lru_cache(maxsize=1)
def task_hooks() -> ModuleType:
    """The ``vcast_synth`` task's ``utils.py`` (``doc_to_text``, ``parse_choice``), loaded by path."""
    path = TASKS_DIR / "vcast_synth" / "utils.py"
    spec = importlib.util.spec_from_file_location("vcast_synth_task_hooks", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def option_text(item: Item, index: int) -> str:
    """``"blue"`` of option ``"C. blue"``."""
    return item.options[index].split(". ", 1)[1]


def reply_text(item: Item) -> str:
    """The answer's option text after a space, ``" blue"`` of ``"C. blue"`` (``" 3"`` for count).

    The task's parser maps a reply that is exactly one option's text to that option's letter.
    The space makes it the same token as in the option line (``"C. blue"`` is ``C``, ``.``, `` blue``).
    """
    return " " + option_text(item, LETTERS.index(item.answer))


def prompt_text(processor: Any, item: Item) -> str:
    """The chat text the plugin sends for ``item`` (generation prompt included)."""
    hooks = task_hooks()
    question = hooks.doc_to_text(item.record(), {"post_prompt": hooks.DEFAULT_POST_PROMPT})
    content = [{"type": "video", "video": f"{item.question_id}.mp4"}, {"type": "text", "text": question}]
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": content}]
    return processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def frame_indices(item: Item, frames: int) -> list[int]:
    """The frames the plugin reads from ``item``'s clip at ``max_num_frames=frames``."""
    total = int(item.frames.shape[0])
    return linspace_indices(total, qwen_frame_count(frames, total))


def running_onsets(item: Item, indices: Sequence[int]) -> torch.Tensor:
    """How many times the object has come on, up to each temporal patch of the read frames.

    An onset is a read frame showing the object after one that does not (or as the first frame);
    ``cut`` counts the new background as the object. Capped at :data:`MAX_FLASHES`. ``[T / 2]`` long
    """
    events = set(item.event_frames)
    if item.category == "cut":
        visible = [index >= item.event_frames[0] for index in indices]
    else:
        visible = [index in events for index in indices]
    onsets = [on and (k == 0 or not visible[k - 1]) for k, on in enumerate(visible)]
    per_patch = np.cumsum(onsets)[1::2]  # the count at each temporal patch's second frame
    return torch.from_numpy(np.minimum(per_patch, MAX_FLASHES)).long()


def encode(processor: Any, items: Sequence[Item], replies: Sequence[str], frames: int) -> Any:
    """One right-padded batch of ``items`` with their clips, ``labels`` on each reply and the
    closing ``<|im_end|>``, and ``running_onsets``: ``[T_b / 2]`` per item (a list: clips differ)."""
    tokenizer = processor.tokenizer
    texts = [prompt_text(processor, item) + reply + tokenizer.eos_token for item, reply in zip(items, replies)]
    indices = [frame_indices(item, frames) for item in items]
    batch = processor(text=texts, return_tensors="pt", padding=True, padding_side="right",
                      **_video_kwargs(items, indices))
    labels = torch.full_like(batch["input_ids"], IGNORE)
    lengths = batch["attention_mask"].sum(dim=1).tolist()
    for row, (reply, length) in enumerate(zip(replies, lengths)):
        first = length - len(tokenizer(reply, add_special_tokens=False)["input_ids"]) - 1  # + <|im_end|>
        labels[row, first:length] = batch["input_ids"][row, first:length]
    batch["labels"] = labels
    batch["running_onsets"] = [running_onsets(item, idx) for item, idx in zip(items, indices)]
    return batch


def generation_inputs(processor: Any, items: Sequence[Item], frames: int) -> Any:
    """The prompts of ``items`` with their clips, left-padded for ``generate``, as the plugin batches them."""
    texts = [prompt_text(processor, item) for item in items]
    indices = [frame_indices(item, frames) for item in items]
    return processor(text=texts, return_tensors="pt", padding=True, padding_side="left",
                     **_video_kwargs(items, indices))


def _video_kwargs(items: Sequence[Item], indices: Sequence[list[int]]) -> dict[str, Any]:
    """The processor's video arguments: each item's frames at ``indices`` (``[T, 3, H, W]`` float) and their metadata."""
    return dict(
        videos=[torch.from_numpy(item.frames[idx]).permute(0, 3, 1, 2).float() for item, idx in zip(items, indices)],
        video_metadata=[{"fps": FPS, "total_num_frames": int(item.frames.shape[0]), "frames_indices": idx}
                        for item, idx in zip(items, indices)],
        do_sample_frames=False, do_resize=False)
