"""The Qwen vision-language families' lmms-eval plugin (each family's ``plugin.py`` names its family):
the model with a pruning method attached.

Prompting and video handling follow lmms-eval 0.7.3's ``models/simple/qwen3_vl.py`` (and its
``qwen2_5_vl.py``, which reads the same way): a system
turn, then one user turn with the videos (and images) before the text; frames read with
``nframes = max_num_frames`` capped to the video, ``linspace(0, N-1, n).round()``, resized the
``qwen_vl_utils`` way (multiples of 32, per-frame pixel cap) and given to the processor with
``do_sample_frames=False, do_resize=False``. Differences, on purpose: the reader is always decord
(``video.py``), odd or short videos never crash, and errors are raised instead of swallowed.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from PIL import Image

from vcast.checkpoint_paths import check_local_checkpoint
from vcast.eval.input_budget import video_budget
from vcast.eval.plugin import VCastLMM
from vcast.eval.plugin_args import check_frames
from vcast.eval.prepared_inputs import PreparedInputs
from vcast.eval.video import is_video_path, qwen_frame_count, qwen_frame_size, qwen_resize, read_qwen_video
from vcast.kept_records import Geometry, merged_grid_geometry
from vcast.validation import check_int

logger = logging.getLogger(__name__)


class VCastQwenVL(VCastLMM):
    """model_args beyond :class:`VCastLMM`'s: ``min_pixels`` (200704), ``max_pixels``
    (1605632; qwen_vl_utils caps a frame at 786432 anyway), ``total_pixels``, ``system_prompt``.
    The class of the checkpoint's ``model_type`` is used (the family's dense or MoE class)."""

    def __init__(
        self,
        pretrained: str,
        min_pixels: int = 256 * 28 * 28,
        max_pixels: int = 1605632,
        total_pixels: Optional[int] = None,
        system_prompt: Optional[str] = "You are a helpful assistant.",
        **kwargs: Any,
    ) -> None:
        from transformers import AutoProcessor

        check_frames(self.family.plugin_id, kwargs.get("max_num_frames", 32))  # before the model loads, not per item
        check_int("min_pixels", min_pixels, 1)
        check_int("max_pixels", max_pixels, 1)
        if min_pixels > max_pixels:
            raise ValueError(f"min_pixels ({min_pixels}) must not exceed max_pixels ({max_pixels})")
        self.min_pixels, self.max_pixels, self.total_pixels = min_pixels, max_pixels, total_pixels
        self.system_prompt = system_prompt
        check_local_checkpoint(pretrained)  # a missing folder named, with its make target
        self.processor = AutoProcessor.from_pretrained(pretrained, max_pixels=max_pixels, min_pixels=min_pixels)
        super().__init__(pretrained, **kwargs)
        vision = self._model.config.vision_config
        self.patch_size, self.merge = int(vision.patch_size), int(vision.spatial_merge_size)

    def _prepare(self, contexts: list[str], visuals: list[list[Any]]) -> PreparedInputs:
        from qwen_vl_utils import fetch_image
        from transformers.video_utils import VideoMetadata

        texts, images, videos, metadata, budgets, indices = [], [], [], [], [], []
        for context, items in zip(contexts, visuals):
            context = context.replace("<image>", "")
            content: list[dict[str, Any]] = []
            for item in items:
                if is_video_path(item):
                    decoded, frames, budget = self._read_video(item)
                    videos.append(frames)
                    budgets.append(budget)
                    indices.append(list(decoded.indices))
                    metadata.append(VideoMetadata(total_num_frames=decoded.total_frames, fps=decoded.fps,
                                                  frames_indices=decoded.indices, video_backend="decord"))
                    content.append({"type": "video", "video": item})
                elif isinstance(item, Image.Image):
                    images.append(fetch_image({"image": item, "min_pixels": self.min_pixels,
                                               "max_pixels": self.max_pixels}, image_patch_size=self.patch_size))
                    content.append({"type": "image", "image": item})
                else:
                    raise ValueError(f"{self.family.plugin_id}: unsupported visual {type(item).__name__} {item!r:.80} "
                                     "(expected a video path or a PIL image)")
            messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
            messages.append({"role": "user", "content": content + [{"type": "text", "text": context}]})
            texts.append(self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                            **self.family.chat_template_kwargs))
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "do_resize": False}
        if len(texts) > 1:
            kwargs.update(padding=True, padding_side="left")
        if videos:
            kwargs.update(videos=videos, video_metadata=metadata, do_sample_frames=False)
        if images:
            kwargs["images"] = images
        inputs = self.processor(**kwargs)
        return PreparedInputs(inputs, indices, budgets if self.input_plan is not None else None)

    def _video_geometries(self, inputs: Any, videos: list[Any]) -> list[Geometry]:
        """One ``video_grid_thw`` row per video, in the order the model saw them."""
        vision = self._model.config.vision_config
        grid = inputs.get("video_grid_thw")
        rows = [] if grid is None else grid.tolist()
        return [merged_grid_geometry(self.family.name, row, vision.patch_size, vision.spatial_merge_size,
                                     vision.temporal_patch_size)
                for row in rows]

    def _read_video(self, path: str) -> tuple[Any, Any, Optional[dict[str, Any]]]:
        """``(decoded video, resized frames [T, 3, H, W], input budget or None)`` of one video.

        Under an input method (:mod:`vcast.input_methods`): ``fewer_frames`` reads fewer frames at the
        per-frame size the unpruned model's frame count gives; ``downsample`` shrinks that size's
        LLM token grid (cells of patch x merge pixels, 32 for Qwen3-VL) by the plan."""
        plan = self.input_plan
        if plan is None:
            decoded = read_qwen_video(path, self.max_num_frames)
            return decoded, qwen_resize(decoded.frames, self.min_pixels, self.max_pixels, self.total_pixels,
                                        self.patch_size), None
        decoded = read_qwen_video(path, self.max_num_frames,
                                  count_for=lambda count: plan.frames(count, self.family.frames_per_step))
        reference_frames = qwen_frame_count(self.max_num_frames, decoded.total_frames)
        height, width = decoded.frames.shape[1:3]
        size = qwen_frame_size(height, width, reference_frames, self.min_pixels, self.max_pixels, self.total_pixels,
                               self.patch_size)
        cell = self.patch_size * self.merge
        reference_grid = (size[0] // cell, size[1] // cell)
        grid = plan.grid(*reference_grid)
        frames = qwen_resize(decoded.frames, self.min_pixels, self.max_pixels, size=(grid[0] * cell, grid[1] * cell))
        logger.debug("%s: %s read as %d of %d frames, grid %s of %s", plan.method, path, len(decoded.indices),
                     reference_frames, grid, reference_grid)
        return decoded, frames, video_budget(len(decoded.indices), reference_frames, grid, reference_grid)

