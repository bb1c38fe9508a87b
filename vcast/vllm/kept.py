"""Kept-token records of the vLLM backend: :mod:`vcast.kept_records`' records, built from the
model's per-video stats (no vLLM import here: the lmms-eval plugin and the tests share it).

How the kept set crosses vLLM's worker boundary, matched to the request it belongs to:

1. the plugin gives each video it sends a key, an int derived from the video's content as sent
   (its path, the frames read and their size: :func:`video_key`), in the video's metadata dict
   (:data:`VIDEO_KEY`);
2. the plugin's front-end processor (:class:`vcast.vllm.model.VCastQwen3VLProcessor`) moves it
   out of the metadata (transformers' ``VideoMetadata`` takes no extra keys) into a per-video
   multimodal field of the same name, which vLLM batches with the video's pixels and hands to
   the model's ``embed_multimodal``;
3. the model keeps it with that video's stats (grid, budgets per step, the bit-packed kept mask;
   see ``_VCastPruning._postprocess_video_embeds_evs``), and ``vcast_drain_stats`` returns them
   through ``LLM.apply_model`` (in-process, or pickled from the workers);
4. :func:`records_from_stats` matches stats to videos by key.

Keys, not order: vLLM's runner encodes the scheduled videos in its own order, may share one
encoding between two requests with the same multimodal hash, and encodes a video again after a
preemption. The key is part of the video's metadata, so of that hash: a key derived from the
content keeps what vLLM shares shared (two questions on one video, as Video-MME asks three, hash
alike with or without keys), every item asking for that video finds its stats under the same key,
and a repeated encoding repeats its key with the same mask (the vision-side selection does not
depend on the question).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from vcast.kept_records import Geometry, KeptRecord

logger = logging.getLogger(__name__)

VIDEO_KEY = "vcast_video_key"
NO_KEY = -1  # a video sent without a key (vLLM's profiling run, a caller other than the plugin)


def video_key(path: str, frame_indices: Sequence[int], shape: Sequence[int]) -> int:
    """A video's key: the first 62 bits of a SHA-1 of its path, the frames read and the frames'
    tensor shape (non-negative, so never :data:`NO_KEY`); equal videos as sent get equal keys."""
    text = f"{path}|{','.join(str(int(i)) for i in frame_indices)}|{'x'.join(str(int(n)) for n in shape)}"
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big") >> 2


@dataclass(frozen=True)
class KeptVideo:
    """One video the plugin sent: its key and what its record needs besides the kept set.

    Attributes:
        key: the video's :data:`VIDEO_KEY` (:data:`NO_KEY` for an unpruned run, which has no stats).
        task, doc_id: the item.
        video: the video's index within the item.
        geometry: the grid the plugin's frames give (:func:`vcast.kept_records.qwen_geometry`).
        frame_indices: the source frames the plugin sent, ``T * frames_per_step`` of them.
    """

    key: int
    task: str
    doc_id: int
    video: int
    geometry: Geometry
    frame_indices: list[int]


def pack_keep_mask(mask: Any) -> np.ndarray:
    """uint8 ``[ceil(N / 8)]``: ``numpy.packbits`` of a flat bool mask ``[N]`` (a torch tensor on
    any device, or an array), one bit per token, C order (what the stats carry)."""
    array = mask.detach().cpu().numpy() if hasattr(mask, "detach") else np.asarray(mask)
    return np.packbits(array.astype(bool, copy=False).reshape(-1))


def stats_mask(stat: Mapping[str, Any], grid: tuple[int, int, int]) -> np.ndarray:
    """bool ``[T, H, W]``: the kept mask of one video's stats (packed by :func:`pack_keep_mask`)."""
    count = int(np.prod(grid))
    packed = np.asarray(stat["mask"], dtype=np.uint8)
    if packed.size != -(-count // 8):
        raise ValueError(f"a packed mask of {packed.size} bytes cannot fill the grid {grid}")
    return np.unpackbits(packed, count=count).astype(bool).reshape(grid)


def records_from_stats(videos: Sequence[KeptVideo], stats: Optional[Sequence[Mapping[str, Any]]],
                       method: str, merge_size: int = 2) -> list[KeptRecord]:
    """One record per video of one ``generate`` call, in ``videos``' order.

    Args:
        videos: the call's videos, as the plugin sent them.
        stats: the model's per-video stats drained after the call (``vcast_drain_stats``), or
            None for an unpruned run (the stock model: every token kept, budgets ``H * W``).
            Stats without one of the call's keys (vLLM's profiling run) are ignored; a key seen
            twice (a video encoded again after a preemption) must carry the same mask.
        method: the registry method of the cell.
        merge_size: the vision config's spatial merge (a stats grid row is in 16 px patches).

    RuntimeError when a video has no stats, or its stats disagree with the plugin's grid (a
    plugin bug, never a user's).
    """
    if stats is None:
        return [_record(video, method, np.ones(video.geometry.grid, dtype=bool)) for video in videos]
    wanted = {video.key for video in videos}
    by_key: dict[int, Mapping[str, Any]] = {}
    for stat in stats:
        key = int(stat.get("key", NO_KEY))
        if key not in wanted:
            continue
        earlier = by_key.get(key)
        if earlier is not None and not np.array_equal(np.asarray(earlier["mask"]), np.asarray(stat["mask"])):
            raise RuntimeError(f"video key {key} was encoded twice with different kept masks")
        by_key[key] = stat
    records = []
    for video in videos:
        stat = by_key.get(video.key)
        if stat is None:
            raise RuntimeError(f"vLLM's model returned no stats for video key {video.key} ({video.task} doc "
                               f"{video.doc_id} video {video.video}): was it sent without its key?")
        t, h, w = (int(side) for side in stat["grid_thw"])
        grid = (t, h // merge_size, w // merge_size)
        if grid != tuple(video.geometry.grid):
            raise RuntimeError(f"vLLM's model saw a {grid} video where the plugin sent {video.geometry.grid} "
                               f"({video.task} doc {video.doc_id})")
        kept = stats_mask(stat, grid)
        budgets = kept.sum(axis=(1, 2)).tolist()
        if budgets != [int(b) for b in stat["budgets"]] or sum(budgets) != int(stat["kept"]):
            raise RuntimeError(f"video key {video.key}: the kept mask holds {budgets} tokens per step, the "
                               f"selection's budgets are {list(stat['budgets'])} ({stat['kept']} in all)")
        records.append(_record(video, method, kept))
    return records


def _record(video: KeptVideo, method: str, kept: np.ndarray) -> KeptRecord:
    """The record of one video with its kept mask ``kept`` bool ``[T, H, W]``."""
    return KeptRecord(task=video.task, doc_id=video.doc_id, video=video.video, method=method,
                      geometry=video.geometry, frame_indices=list(video.frame_indices),
                      budgets=[int(b) for b in kept.sum(axis=(1, 2))], kept=kept)
