"""What an architecture adapter provides to the pruning hooks.

An adapter knows one model family: where its embedder, language model and vision encoder
are; how to find each video's tokens in a prompt (``segments``); and how position ids and any
extra per-token inputs (DeepStack features) follow a pruned layout. The hook machinery that
uses it (:mod:`vcast.models.handle`) is shared by every family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import nn

from vcast.models.layout import SequenceLayout


@dataclass(frozen=True)
class PromptContext:
    """The embedder's inputs at prefill, kept for the language-model hook that follows.

    Attributes:
        input_ids: ``[B, L]`` or None (when the caller passed ``inputs_embeds``).
        mm_token_type_ids: ``[B, L]`` (0 text, 1 image, 2 video) or None.
        video_token_counts: tokens of each video in prompt order (Qwen3-VL: from the vision
            encoder's per-video outputs, or from ``video_grid_thw``), or None.
        video_frames: frames per video from ``pixel_values_videos [B, F, ...]`` (LLaVA), or None.
    """

    input_ids: Optional[torch.Tensor]
    mm_token_type_ids: Optional[torch.Tensor] = None
    video_token_counts: Optional[list[int]] = None
    video_frames: Optional[int] = None


@dataclass(frozen=True)
class Segment:
    """The tokens of one video (or image) of one sample, laid out as ``[T, P]``.

    Attributes:
        sample: batch row.
        kind: ``"video"`` or ``"image"``.
        columns: LongTensor ``[T * P]``: sequence column of each token, frame-major, on the
            embeddings' device. Tokens of the run that are not listed (image-newline tokens)
            are always kept.
        frames: ``T``.
        tokens_per_frame: ``P``.
    """

    sample: int
    kind: str
    columns: torch.Tensor
    frames: int
    tokens_per_frame: int


@dataclass(frozen=True)
class ActivePruning:
    """What the decode steps after a pruned prefill need to know.

    Attributes:
        layout: the pruned batch layout.
        full_length: ``L``, the prompt length the caller (``generate``) keeps counting from.
        attention_mask: ``[B, L']`` mask of the pruned prompt, or None when no row is padded.
    """

    layout: SequenceLayout
    full_length: int
    attention_mask: Optional[torch.Tensor]


class Adapter:
    """Base class; subclasses set the class attributes and implement the abstract methods."""

    family: str = ""
    position_policies: tuple[str, ...] = ("original",)
    default_positions: str = "original"

    def __init__(self, model: nn.Module, positions: Optional[str], compress_images: bool) -> None:
        self.model = model
        positions = self.default_positions if positions is None else positions
        if positions not in self.position_policies:
            raise ValueError(
                f"positions={positions!r} is not available for {self.family}; "
                f"choose one of {', '.join(map(repr, self.position_policies))}"
            )
        if not isinstance(compress_images, bool):
            raise ValueError(f"compress_images must be True or False, got {compress_images!r}")
        self.positions = positions
        self.compress_images = compress_images

    # Modules -------------------------------------------------------------------------------
    @property
    def embedder(self) -> nn.Module:
        """The module that turns ``input_ids`` + pixels into ``inputs_embeds`` (``model.model``)."""
        return self.model.model

    @property
    def language_model(self) -> nn.Module:
        return self.model.model.language_model

    def vision_modules(self) -> tuple[nn.Module, nn.Module]:
        """(first, last) modules of the vision path: timed from the first's start to the last's end."""
        raise NotImplementedError

    # Prompt analysis -----------------------------------------------------------------------
    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PromptContext:
        raise NotImplementedError

    def segments(self, context: PromptContext, inputs_embeds: torch.Tensor) -> list[Segment]:
        raise NotImplementedError

    # Re-laying the language model's inputs ---------------------------------------------------
    def prefill_positions(self, position_ids: Optional[torch.Tensor], layout: SequenceLayout,
                          length: int) -> Optional[torch.Tensor]:
        raise NotImplementedError

    def decode_positions(self, position_ids: Optional[torch.Tensor], active: ActivePruning) -> Optional[torch.Tensor]:
        raise NotImplementedError

    def prefill_extras(self, kwargs: dict[str, Any], layout: SequenceLayout, survives: torch.Tensor) -> None:
        """Re-lay any other per-token inputs in ``kwargs`` in place (``survives`` [B, L] bool)."""

    def check_decode(self, kwargs: dict[str, Any]) -> None:
        """Raise when a decode step after a pruned prefill lacks what correct positions need."""
        if kwargs.get("position_ids") is None and self.positions == "original":
            raise ValueError(
                f"{self.family}: a decoding step after a pruned prefill was called without position_ids; "
                "pass the unpruned positions (generate() does this), or the new tokens would be placed "
                "right after the pruned prompt instead of after the original one"
            )


def token_runs(mask: torch.Tensor) -> list[tuple[int, int, int]]:
    """Maximal runs of True in ``mask [B, L]`` as ``(row, start, length)``, row-major."""
    found = mask.nonzero()
    count = found.shape[0]
    if count == 0:
        return []
    rows, cols = found[:, 0], found[:, 1]
    starts_run = torch.ones(count, dtype=torch.bool, device=mask.device)
    starts_run[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1] + 1)
    starts = starts_run.nonzero().squeeze(1)
    ends = torch.cat([starts[1:], starts.new_tensor([count])])
    return list(zip(rows[starts].tolist(), cols[starts].tolist(), (ends - starts).tolist()))
