"""Real processor batches for the model tests: generated clips through each tiny checkpoint's processor."""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
from transformers.video_utils import VideoMetadata

from vcast.models.reference import probe_video  # noqa: F401  (re-exported for the tests)

FPS = 4.0
# Qwen3-VL tiny processors cap a clip at 16 merged cells; lift the cap so an 8x128x128 clip
# keeps its 4 temporal patches x 8x8 patches = 4 x 16 tokens.
QWEN_VIDEO_SIZE = {"shortest_edge": 4096, "longest_edge": 16 * 128 * 128}


def clip(frames: int = 8, side: int = 128, seed: int = 0) -> np.ndarray:
    """uint8 [T, side, side, 3]: noise plus a bright square that moves, so frames differ."""
    rng = np.random.default_rng(seed)
    video = rng.integers(0, 120, (frames, side, side, 3), dtype=np.uint8)
    for t in range(frames):
        y = x = (t * side) // (2 * frames)
        video[t, y : y + side // 4, x : x + side // 4] = 255
    return video


def batch(arch: str, processor: Any, questions: Sequence[str], videos: Sequence[Optional[np.ndarray]],
          images: Sequence[Optional[np.ndarray]] = ()) -> Any:
    """Chat-templated prompts (image first, then video, then the question), left-padded."""
    images = list(images) or [None] * len(questions)
    prompts, video_list, image_list, metadata = [], [], [], []
    for question, video, image in zip(questions, videos, images):
        content: list[dict[str, str]] = []
        if image is not None:
            content.append({"type": "image"})
            image_list.append(image)
        if video is not None:
            content.append({"type": "video"})
            video_list.append(video)
            metadata.append(VideoMetadata(total_num_frames=len(video), fps=FPS, frames_indices=list(range(len(video)))))
        content.append({"type": "text", "text": question})
        messages = [{"role": "user", "content": content}]
        prompts.append(processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))
    processor.tokenizer.padding_side = "left"
    kwargs: dict[str, Any] = {"text": prompts, "return_tensors": "pt", "padding": True}
    if video_list:
        kwargs["videos"] = video_list
        if arch != "llava_onevision":
            kwargs.update(video_metadata=metadata, do_sample_frames=False, size=QWEN_VIDEO_SIZE)
    if image_list:
        kwargs["images"] = image_list
    return processor(**kwargs)
