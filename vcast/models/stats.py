"""What one compressed call did: tokens kept per video, budgets, timings, peak memory."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import torch

from vcast.models.llm_plan import layer_averaged_retention


@dataclass(frozen=True)
class SegmentStats:
    """One compressed video (or image, when images are compressed) of one sample.

    Attributes:
        sample: row of the batch it belongs to.
        kind: ``"video"`` or ``"image"``.
        frames: ``T`` (temporal patches for Qwen3-VL, frames for LLaVA).
        tokens_per_frame: ``P``.
        total: ``T * P`` tokens before pruning.
        kept: tokens kept.
        budgets: tokens kept per frame, length ``T``.
        keep: LongTensor ``[kept]`` (CPU): ascending flat indices into the ``T * P`` tokens.
        positions: LongTensor ``[T * P]`` (CPU): the sequence column of each token of the video
            in the unpruned prompt, so ``positions[keep]`` are the kept tokens' columns.
        merged: whether the kept positions hold merged tokens (a merging method) rather than
            the originals.
    """

    sample: int
    kind: str
    frames: int
    tokens_per_frame: int
    total: int
    kept: int
    budgets: list[int]
    keep: torch.Tensor
    positions: torch.Tensor
    merged: bool = False


@dataclass(frozen=True)
class LLMStageStats:
    """One in-LLM drop of one call.

    Attributes:
        layer: ``K``: the layers from ``K`` on see the kept tokens.
        kept: video tokens per sample from layer ``K`` on.
        columns: per sample, LongTensor (CPU) of the kept video tokens' columns in the sequence
            that entered the language model (after any pre-LLM pruning).
        prompt_columns: per sample, LongTensor (CPU) of the same tokens' columns in the unpruned
            prompt (the space of :attr:`SegmentStats.positions`), in the same order; empty when
            the stage was recorded without them.
    """

    layer: int
    kept: list[int]
    columns: list[torch.Tensor]
    prompt_columns: list[torch.Tensor] = field(default_factory=list)


@dataclass(frozen=True)
class CallStats:
    """The last compressed ``forward``/``generate`` call.

    Times are seconds (CUDA events on GPU, ``perf_counter`` on CPU; see ``timer``):
    ``vision_s`` the vision encoder (ViT + merger / projector), ``selection_s`` finding the
    video tokens, selecting and re-laying the sequence, ``prefill_s`` the language model's
    prefill on the pruned sequence, ``decode_s`` all decoding steps (``decode_steps`` of them).
    ``peak_memory_bytes`` is over the whole call; ``memory_source`` says what it measured.
    ``tokens_before`` / ``tokens_after`` are the real (unpadded) prompt lengths per sample
    entering the language model. In-LLM methods also drop tokens between layers:
    ``llm_stages`` lists the drops and ``num_layers`` is the language model's depth.
    """

    method: str
    ratio: float
    segments: list[SegmentStats]
    tokens_before: list[int]
    tokens_after: list[int]
    vision_s: float
    selection_s: float
    prefill_s: float
    decode_s: float
    decode_steps: int
    peak_memory_bytes: Optional[int]
    memory_source: str
    timer: str
    pruned: bool = field(default=False)
    num_layers: Optional[int] = None
    llm_stages: list[LLMStageStats] = field(default_factory=list)

    @property
    def videos(self) -> list[SegmentStats]:
        return [s for s in self.segments if s.kind == "video"]

    @property
    def kept_video_tokens(self) -> int:
        return sum(s.kept for s in self.videos)

    @property
    def total_video_tokens(self) -> int:
        return sum(s.total for s in self.videos)

    @property
    def final_video_tokens(self) -> int:
        """Video tokens the last layer sees (after every in-LLM stage)."""
        if not self.llm_stages:
            return self.kept_video_tokens
        return sum(self.llm_stages[-1].kept)

    @property
    def layer_retention(self) -> Optional[float]:
        """The share of the video tokens each decoder layer sees, averaged over the layers
        (tokens removed before and inside the LLM, weighted by the layers they live through);
        None without video tokens. Equals ``kept / total`` for a method that works before the LLM."""
        total = self.total_video_tokens
        if total == 0:
            return None
        if not self.llm_stages or not self.num_layers:
            return self.kept_video_tokens / total
        return layer_averaged_retention(self.kept_video_tokens / total, [stage.layer for stage in self.llm_stages],
                                        [sum(stage.kept) / total for stage in self.llm_stages], self.num_layers)

    def layer_lengths(self, num_layers: int) -> list[list[int]]:
        """``[samples][num_layers]``: the real (unpadded) prompt length each decoder layer processes
        at prefill, per sample: ``tokens_after``, less, from each in-LLM stage's layer on, the video
        tokens dropped or merged away there (exact: the stages record each row's kept count).
        Empty when the call recorded no prompt lengths (a prompt without videos)."""
        out = []
        for sample, length in enumerate(self.tokens_after):
            entered = sum(s.kept for s in self.videos if s.sample == sample)
            lengths = [length] * num_layers
            for stage in self.llm_stages:
                lengths[stage.layer:] = [length - entered + stage.kept[sample]] * (num_layers - stage.layer)
            out.append(lengths)
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: tensors become lists."""
        out = asdict(self)
        for segment in out["segments"]:
            segment["keep"] = segment["keep"].tolist()
            segment["positions"] = segment["positions"].tolist()
        for stage in out["llm_stages"]:
            stage["columns"] = [columns.tolist() for columns in stage["columns"]]
            stage["prompt_columns"] = [columns.tolist() for columns in stage["prompt_columns"]]
        out.update(kept_video_tokens=self.kept_video_tokens, total_video_tokens=self.total_video_tokens,
                   final_video_tokens=self.final_video_tokens, layer_retention=self.layer_retention)
        return out
