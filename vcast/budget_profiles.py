"""Token budgets per frame (LLaVA-OneVision) or per temporal patch of 2 frames (Qwen3-VL) of
V-CAST's temporal allocations, on a model's real visual tokens of a video of one's own.

The report draws its budget figures from what the evaluated cells recorded
(:mod:`vcast.report.recorded_budgets`); this module is the library side, for any video: it reads
the video as the lmms-eval plugins do and runs the vision encoder, so the tokens are exactly the
ones the pruning hooks hand to :func:`vcast.select` (Qwen3-VL: after the 2x2 merger;
LLaVA-OneVision: after projection and 2x2 bilinear pooling, the trailing image-newline excluded).
A point is one ``T`` step of the tokens (:func:`step_name` says which).

    tokens = video_tokens("Qwen/Qwen3-VL-8B-Instruct", "clip.mp4", frames=32)   # [T, P, D]
    profiles = budget_profiles(tokens, ratio=0.25)                             # name -> [T]
    panels, group = video_profiles("Qwen/Qwen3-VL-8B-Instruct", ["a.mp4", "b.mp4"], frames=32, ratio=0.25)
    vcast.report.budget_profiles_figure.plot_budget_profiles(panels, "budgets", ratio=0.25, frames_per_step=group)
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from torch import nn

import vcast
from vcast.families import Family, family_of
from vcast.temporal import TEMPORAL_STRATEGIES

logger = logging.getLogger(__name__)

PathLike = Union[str, Path]

# Allocation name (the ``temporal`` parameter of method "vcast") -> legend label in the paper.
ALLOCATION_LABELS: dict[str, str] = {
    "uniform": "Uniform Allocation",
    "uniqueness": "Global Uniqueness",
    "curvature": "Curvature-Aware (V-CAST)",
}
DEFAULT_ALLOCATIONS: tuple[str, ...] = ("uniform", "uniqueness", "curvature")

def step_name(frames_per_step: int, *, plural: bool = False) -> str:
    """What one ``T`` step of :meth:`VideoTokenReader.tokens` is: ``frame``, or ``temporal patch``
    when it holds several frames (Qwen3-VL: 2)."""
    name = "frame" if frames_per_step == 1 else "temporal patch"
    if not plural:
        return name
    return f"{name}es" if name.endswith("patch") else f"{name}s"


def panel_title(video: str, steps: int, tokens_per_step: int, frames_per_step: int) -> str:
    """A budget-profile panel's title: the video and its token grid spelt out,
    ``clip.mp4: 8 temporal patches × 16 tokens``."""
    return f"{video}: {steps} {step_name(frames_per_step, plural=steps != 1)} \u00d7 {tokens_per_step} tokens"


def _pixel_defaults(family: Family) -> tuple[int, int]:
    """(min_pixels, max_pixels) ``family``'s plugin uses when none are given, read from its
    signature so the two never drift apart."""
    params = inspect.signature(family.load("plugin").__init__).parameters
    return int(params["min_pixels"].default), int(params["max_pixels"].default)


@dataclass
class VideoTokenReader:
    """A loaded checkpoint (model + processor) that turns video files into ``[T, P, D]`` tokens.

    Load once with :meth:`load` and call :meth:`tokens` for each video, so a figure over several
    videos loads the model once.

    Attributes:
        model: the ``*ForConditionalGeneration`` instance, in eval mode.
        processor: its ``AutoProcessor``.
        model_type: ``config.model_type`` (of a family :mod:`vcast.families` knows).
    """

    model: nn.Module
    processor: Any
    model_type: str

    @property
    def family(self) -> Family:
        return family_of(self.model_type)

    @classmethod
    def load(cls, model_dir: PathLike, *, device: Union[str, torch.device] = "cpu",
             dtype: Optional[torch.dtype] = None) -> "VideoTokenReader":
        """Load ``model_dir`` (folder or hub id) with the class its config names.

        ``dtype`` defaults to float32 on CPU and bfloat16 elsewhere (the plugins' ``dtype=auto``).
        """
        import transformers

        config = transformers.AutoConfig.from_pretrained(str(model_dir))
        try:
            family_of(config)
        except TypeError as error:
            raise ValueError(f"{model_dir}: {error}") from None
        device = torch.device(device)
        if dtype is None:
            dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
        model = transformers.AutoModelForImageTextToText.from_pretrained(str(model_dir), dtype=dtype)
        model.to(device).eval()
        processor = transformers.AutoProcessor.from_pretrained(str(model_dir))
        logger.info("loaded %s (%s) on %s in %s", model_dir, config.model_type, device, dtype)
        return cls(model=model, processor=processor, model_type=config.model_type)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def frames_per_step(self) -> int:
        """Frames behind one ``T`` step of :meth:`tokens`: a merging ViT's temporal patch size (2),
        1 for a pooling tower such as LLaVA-OneVision's (one step per frame)."""
        return int(getattr(self.model.config.vision_config, "temporal_patch_size", self.family.frames_per_step))

    def tokens(self, video: PathLike, frames: int, *, max_pixels: Optional[int] = None,
               min_pixels: Optional[int] = None) -> torch.Tensor:
        """Float32 CPU ``[T, P, D]`` tokens of ``video`` read with ``frames`` frames.

        Merging ViTs (the Qwen families): ``T = grid_t`` temporal patches (2 frames each),
        ``P = grid_h * grid_w / 4``. Pooling towers (LLaVA-OneVision): ``T = frames``, ``P`` pooled
        tokens per frame; the pixel bounds do not apply (its processor resizes to the tower's fixed
        size) and are ignored.
        """
        from vcast.models.adapter import flat_tokens
        from vcast.models.reference import encode

        with torch.no_grad():
            if self.family.fixed_resolution:  # the processor resizes to the tower's one input size
                inputs, num_frames, per_frame = self._pooled_inputs(str(video), frames)
            else:  # the plugin resizes frames to a pixel budget
                inputs, num_frames, per_frame = self._merged_inputs(str(video), frames, max_pixels, min_pixels)
            inputs = {key: value.to(self.device) if isinstance(value, torch.Tensor) else value
                      for key, value in inputs.items()}
            pooled = flat_tokens(encode(self.model, inputs)["video"].pooler_output)
        # A trailing token after the frames (LLaVA's image newline) is never selected.
        pooled = pooled[: num_frames * per_frame]
        if pooled.shape[0] != num_frames * per_frame:
            raise RuntimeError(f"the encoder returned {pooled.shape[0]} tokens for {num_frames} x {per_frame}")
        tokens = pooled.reshape(num_frames, per_frame, -1).float().cpu()
        logger.info("%s: %d frames -> tokens [T=%d, P=%d, D=%d]", video, frames, *tokens.shape)
        return tokens

    def _merged_inputs(self, video: str, frames: int, max_pixels: Optional[int],
                     min_pixels: Optional[int]) -> tuple[Mapping[str, Any], int, int]:
        """The plugin's reading (decord, ``linspace().round()``, qwen_vl_utils resize), fed to the
        video processor with its own sampling and resizing off, as the plugin does."""
        from transformers.video_utils import VideoMetadata

        from vcast.eval.video import qwen_resize, read_qwen_video

        default_min, default_max = _pixel_defaults(self.family)
        min_pixels = default_min if min_pixels is None else min_pixels
        max_pixels = default_max if max_pixels is None else max_pixels
        decoded = read_qwen_video(video, frames)
        resized = qwen_resize(decoded.frames, min_pixels, max_pixels, None, int(self.model.config.vision_config.patch_size))
        metadata = VideoMetadata(total_num_frames=decoded.total_frames, fps=decoded.fps,
                                 frames_indices=decoded.indices, video_backend="decord")
        inputs = self.processor.video_processor(videos=[resized], video_metadata=[metadata], do_sample_frames=False,
                                                do_resize=False, return_tensors="pt")
        grid_t, grid_h, grid_w = inputs["video_grid_thw"][0].tolist()
        merge = self.model.config.vision_config.spatial_merge_size
        # The merger emits tokens temporal patch by temporal patch, each a row-major grid of
        # merged 2x2 blocks: the same frame-major order the prompt's placeholders have.
        return dict(inputs), int(grid_t), int(grid_h * grid_w // merge**2)

    def _pooled_inputs(self, video: str, frames: int) -> tuple[Mapping[str, Any], int, int]:
        from vcast.eval.video import read_llava_video

        decoded = read_llava_video(video, frames)
        inputs = dict(self.processor.video_processor(videos=[decoded.frames], return_tensors="pt"))
        inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(self.model.dtype)
        per_frame = self.family.load("adapter")(self.model, None, False).tokens_per_frame
        return inputs, int(inputs["pixel_values_videos"].shape[1]), per_frame


def video_tokens(model_dir: PathLike, video: PathLike, frames: int, *, max_pixels: Optional[int] = None,
                 min_pixels: Optional[int] = None, device: Union[str, torch.device] = "cpu",
                 dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """Float32 ``[T, P, D]``: the visual tokens V-CAST's selection sees for ``video``.

    Loads ``model_dir`` (a checkpoint of a family :mod:`vcast.families` knows) for this one call;
    to read several videos, use :class:`VideoTokenReader` directly. ``min_pixels`` /
    ``max_pixels`` default to the family plugin's defaults (merging ViTs only).
    """
    reader = VideoTokenReader.load(model_dir, device=device, dtype=dtype)
    return reader.tokens(video, frames, max_pixels=max_pixels, min_pixels=min_pixels)


def budget_profiles(tokens: torch.Tensor, ratio: float,
                    allocations: Sequence[str] = DEFAULT_ALLOCATIONS) -> dict[str, np.ndarray]:
    """Per-frame budgets of V-CAST under each temporal allocation, same ratio, same tokens.

    Args:
        tokens: float ``[T, P, D]`` tokens of one video.
        ratio: retention ratio in (0, 1].
        allocations: values of V-CAST's ``temporal`` parameter (see :mod:`vcast.temporal`).
    Returns:
        ``{allocation: int64 array [T]}`` in the order given; each sums to the same total.
    """
    unknown = [name for name in allocations if name not in TEMPORAL_STRATEGIES]
    if unknown:
        raise ValueError(f"unknown allocation(s) {unknown}; expected some of {TEMPORAL_STRATEGIES}")
    if not allocations:
        raise ValueError("allocations is empty")
    profiles: dict[str, np.ndarray] = {}
    for name in allocations:
        selection = vcast.select(tokens, ratio, "vcast", temporal=name)
        profiles[name] = selection.budgets.cpu().numpy().astype(np.int64)
    return profiles


def video_profiles(model_dir: PathLike, videos: Sequence[PathLike], *, frames: int, ratio: float,
                   max_pixels: Optional[int] = None, min_pixels: Optional[int] = None,
                   device: Union[str, torch.device] = "cpu") -> tuple[list[tuple[str, dict[str, np.ndarray]]], int]:
    """``(panels, frames per step)`` for several videos with the model loaded once: one panel per
    video, titled with its grid spelt out (``clip.mp4: 8 temporal patches × 16 tokens``, see
    :func:`panel_title`), ``{allocation: budgets [T]}`` each (:func:`budget_profiles`); draw them
    with :func:`vcast.report.budget_profiles_figure.plot_budget_profiles`."""
    if not videos:
        raise ValueError("video_profiles: no videos given")
    reader = VideoTokenReader.load(model_dir, device=device)
    panels = []
    for video in videos:
        tokens = reader.tokens(video, frames, max_pixels=max_pixels, min_pixels=min_pixels)
        title = panel_title(Path(video).name, int(tokens.shape[0]), int(tokens.shape[1]), reader.frames_per_step)
        panels.append((title, budget_profiles(tokens, ratio)))
    return panels, reader.frames_per_step
