"""``vcast_llava_ov``: LLaVA-OneVision and LLaVA-Video (Hugging Face format) with a pruning
method attached.

Prompting and video handling follow lmms-eval 0.7.3's ``models/simple/llava_hf.py`` (the
wrapper that loads these checkpoints with transformers 5; ``llava_onevision`` / ``llava_vid``
need the GitHub-only LLaVA-NeXT package): ``<video>\\n`` (or ``<image>`` tokens) before the
context, the tokenizer's chat template with one user turn, ``max_num_frames`` frames at
``np.linspace(0, N-1, n, dtype=int)`` read with decord, the processor's own resize. Differences,
on purpose: any batch size (left padding; the adapter re-pads after pruning), and errors are
raised instead of answered with an empty string.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from PIL import Image

from vcast.checkpoint_paths import check_local_checkpoint
from vcast.eval.input_budget import input_plan_refusal, video_budget
from vcast.eval.plugin import VCastLMM
from vcast.eval.prepared_inputs import PreparedInputs
from vcast.eval.video import is_video_path, read_llava_video
from vcast.families.llava_onevision import FAMILY
from vcast.kept_records import Geometry, pooled_grid_geometry

logger = logging.getLogger(__name__)

IMAGE_TOKEN = "<image>"
VIDEO_TOKEN = "<video>"


class VCastLlavaOV(VCastLMM):
    """model_args are :class:`VCastLMM`'s; ``chat_template`` overrides the tokenizer's."""

    family = FAMILY

    def __init__(self, pretrained: str, chat_template: Optional[str] = None, **kwargs: Any) -> None:
        from transformers import AutoProcessor

        check_local_checkpoint(pretrained)  # a missing folder named, with its make target
        self.processor = AutoProcessor.from_pretrained(pretrained)
        self.processor.tokenizer.padding_side = "left"
        if chat_template is not None:
            self.processor.tokenizer.chat_template = chat_template
        if self.processor.tokenizer.chat_template is None:
            raise ValueError(f"{FAMILY.plugin_id}: {pretrained}'s tokenizer has no chat template; pass chat_template=")
        super().__init__(pretrained, **kwargs)

    def _check_input_plan(self, plan: Any) -> None:
        refusal = input_plan_refusal(FAMILY.plugin_id, plan)
        if refusal is not None:
            raise ValueError(refusal)

    def _prepare(self, contexts: list[str], visuals: list[list[Any]]) -> PreparedInputs:
        texts, images, videos, budgets, indices = [], [], [], [], []
        # An input method (fewer_frames) reads fewer of the max_num_frames frames LLaVA reads.
        count = self.max_num_frames if self.input_plan is None else self.input_plan.frames(self.max_num_frames)
        for context, items in zip(contexts, visuals):
            sample_videos = [item for item in items if is_video_path(item)]
            sample_images = [item for item in items if isinstance(item, Image.Image)]
            if len(sample_videos) + len(sample_images) != len(items):
                raise ValueError(f"{FAMILY.plugin_id}: unsupported visual(s) in {items!r:.120} "
                                 "(expected video paths or PIL images)")
            for path in sample_videos:
                decoded = read_llava_video(path, count)
                videos.append(decoded.frames)
                indices.append(list(decoded.indices))
            budgets.extend(video_budget(count, self.max_num_frames) for _ in sample_videos)
            images.extend(sample_images)
            if IMAGE_TOKEN not in context:
                if sample_images:
                    context = " ".join([IMAGE_TOKEN] * len(sample_images)) + "\n" + context
                if sample_videos:
                    context = " ".join([VIDEO_TOKEN] * len(sample_videos)) + "\n" + context
            messages = [{"role": "user", "content": context}]
            texts.append(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": len(texts) > 1}
        if videos:
            kwargs["videos"] = videos
        if images:
            kwargs["images"] = images
        inputs = self.processor(**kwargs)
        for key in ("pixel_values", "pixel_values_videos"):
            if key in inputs:
                inputs[key] = inputs[key].to(self.model.dtype)
        return PreparedInputs(inputs, indices, budgets if self.input_plan is not None else None)

    def _video_geometries(self, inputs: Any, videos: list[Any]) -> list[Geometry]:
        """Each video's frames of the pooled grid (its trailing newline token is not a grid token),
        on the frames the processor resized (``pixel_values_videos`` ``[V, F, 3, S, S]``: the square
        input the vision tower takes, 384 px)."""
        height, width = inputs["pixel_values_videos"].shape[-2:]
        if height != width:
            raise ValueError(f"{FAMILY.plugin_id}: the processor gave {height}x{width} frames; the tower takes squares")
        return [pooled_grid_geometry(FAMILY.name, video.frames, video.tokens_per_frame, int(height)) for video in videos]
