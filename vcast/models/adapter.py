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

from vcast.families import family_of
from vcast.models.layout import SequenceLayout
from vcast.models.vision_probe import VisionRecord


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


class TokenSource:
    """The LLM-space tokens written over the prompt's visual placeholders.

    Either the embeddings the language model is about to receive (``from_embeddings``), or,
    before embedding, the vision encoder's outputs (``from_encoder``): its ``i``-th token of a
    kind is the one written over the ``i``-th placeholder of that kind in row-major order.
    A merging method's tokens are written back with :meth:`write` (on a copy: the caller's
    tensors are never modified).
    """

    def __init__(self, device: torch.device, embeddings: Optional[torch.Tensor] = None,
                 flat: Optional[dict[str, torch.Tensor]] = None, rank: Optional[dict[str, torch.Tensor]] = None) -> None:
        self.device = device
        self.embeddings = embeddings
        self.flat = dict(flat or {})
        self._rank = rank or {}
        self.written = False

    @classmethod
    def from_embeddings(cls, inputs_embeds: torch.Tensor) -> "TokenSource":
        return cls(inputs_embeds.device, embeddings=inputs_embeds)

    @classmethod
    def from_encoder(cls, flat: dict[str, torch.Tensor], masks: dict[str, torch.Tensor]) -> "TokenSource":
        """``flat[kind]`` [N, D] encoder tokens; ``masks[kind]`` [B, L] placeholders (N True each)."""
        rank = {kind: (mask.flatten().long().cumsum(0) - 1).view(mask.shape) for kind, mask in masks.items()}
        device = next(iter(flat.values())).device
        return cls(device, flat=flat, rank=rank)

    def _rows(self, kind: str, row: int, columns: torch.Tensor) -> torch.Tensor:
        flat = self.flat[kind]
        return self._rank[kind][row].index_select(0, columns.to(self._rank[kind].device)).to(flat.device)

    def tokens(self, kind: str, row: int, columns: torch.Tensor) -> torch.Tensor:
        """``[len(columns), D]`` tokens at ``columns`` of batch row ``row``."""
        if self.embeddings is not None:
            return self.embeddings[row].index_select(0, columns)
        return self.flat[kind].index_select(0, self._rows(kind, row, columns))

    def write(self, kind: str, row: int, columns: torch.Tensor, values: torch.Tensor) -> None:
        """Put ``values`` [len(columns), D] at ``columns`` of row ``row`` (cast to the tokens' dtype)."""
        if not self.written:  # copy once, so the caller's tensors stay as they were
            if self.embeddings is not None:
                self.embeddings = self.embeddings.clone()
            else:
                self.flat = {k: v.clone() for k, v in self.flat.items()}
            self.written = True
        if self.embeddings is not None:
            self.embeddings[row, columns.to(self.embeddings.device)] = values.to(self.embeddings)
        else:
            flat = self.flat[kind]
            flat[self._rows(kind, row, columns)] = values.to(flat)


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

    family: str = ""  # the family's display name, for messages (set from the model's family)
    position_policies: tuple[str, ...] = ("original",)
    default_positions: str = "original"
    # Tokens after each video's frames in its placeholder run that are not frame tokens (LLaVA's newline).
    trailing_tokens: int = 0

    def __init__(self, model: nn.Module, positions: Optional[str], compress_images: bool) -> None:
        self.model = model
        self.family = family_of(model).display
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

    # Vision-encoder inputs for the methods that need them (vcast.models.vision_probe) ---------
    def feature_attention(self) -> nn.Module:
        """The attention module of the vision encoder's feature layer."""
        raise NotImplementedError

    def vision_call_layout(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> VisionRecord:
        """A record of one call of ``vision_modules()[0]``: what it encodes, in LLM tokens."""
        raise NotImplementedError

    def feature_scores(self, module: nn.Module, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """From the feature-layer attention's inputs: attention column means ``[N]`` and head-mean
        keys ``[N, d]`` per LLM token of the call, pooled like the tokens."""
        raise NotImplementedError

    # Prompt analysis -----------------------------------------------------------------------
    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PromptContext:
        raise NotImplementedError

    def segments(self, context: PromptContext, source: TokenSource) -> list[Segment]:
        raise NotImplementedError

    def placeholder_mask(self, context: PromptContext, kind: str) -> Optional[torch.Tensor]:
        """BoolTensor ``[B, L]``: the prompt's ``kind`` ("video"/"image") placeholders, or None."""
        raise NotImplementedError

    def token_id(self, kind: str) -> int:
        """The placeholder token id of ``kind`` ("video"/"image") in the model's config."""
        config = self.model.config
        token = getattr(config, f"{kind}_token_id", None)
        return token if token is not None else getattr(config, f"{kind}_token_index")  # LLaVA's name

    def full_positions(self, inputs: Any) -> Optional[torch.Tensor]:
        """The position ids ``generate`` would give the unpruned prompt of processor batch ``inputs``,
        in the layout the language model takes (MRoPE families: ``[4, B, L]``), or None when the
        text model numbers tokens 0..L-1 itself."""
        return None

    # Pruning before embedding (when the encoder outputs reach the model precomputed) -----------
    def can_prune_encoded(self, kwargs: dict[str, Any]) -> bool:
        """Whether this prefill can be pruned before embedding: the video encoder outputs are
        given (``generate`` in transformers >= 5.18 passes them) along with ``input_ids``."""
        encoded = kwargs.get("mm_encoder_outputs") or {}
        return (encoded.get("video") is not None and kwargs.get("input_ids") is not None
                and kwargs.get("pixel_values_videos") is None and kwargs.get("inputs_embeds") is None)

    def wrap_pooled(self, kind: str, tokens: torch.Tensor) -> Any:
        """Pruned ``[K, D]`` tokens in the shape the model's forward expects for ``kind``."""
        return (tokens,)

    def prune_encoded(self, encoded: dict[str, Any], masks: dict[str, torch.Tensor], flat: dict[str, torch.Tensor],
                      survives: torch.Tensor, rewritten: bool = False) -> dict[str, Any]:
        """New ``mm_encoder_outputs`` holding only the surviving tokens (the input is not modified).

        ``masks[kind]`` [B, L] are the placeholders and ``flat[kind]`` [N, D] the pooled encoder
        tokens of each kind present (as the caller already computed them for the selection, with
        any merged tokens written in: ``rewritten``).
        """
        pruned = dict(encoded)
        for kind, mask in masks.items():
            kept = survives.to(mask.device)[mask].nonzero().squeeze(1)
            if kept.numel() == flat[kind].shape[0] and not rewritten:
                continue  # nothing of this kind was dropped or merged
            output = encoded[kind]
            fields = dict(output)
            fields["pooler_output"] = self.wrap_pooled(kind, flat[kind].index_select(0, kept.to(flat[kind].device)))
            deepstack = getattr(output, "deepstack_features", None)
            if deepstack is not None:
                layers = [flat_tokens(layer) for layer in deepstack]
                fields["deepstack_features"] = [(layer.index_select(0, kept.to(layer.device)),) for layer in layers]
            pruned[kind] = type(output)(**fields)
        return pruned

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


def flat_tokens(pooled: Any) -> torch.Tensor:
    """Encoder tokens as one ``[N, D]`` tensor (per-item tuples concatenated, batches flattened)."""
    if isinstance(pooled, (tuple, list)):
        return torch.cat(list(pooled), 0) if len(pooled) != 1 else pooled[0]
    return pooled.reshape(-1, pooled.shape[-1])


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
