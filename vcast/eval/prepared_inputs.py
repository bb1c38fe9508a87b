"""A batch a plugin's ``_prepare`` made ready for ``generate``, with what vcast records beside it.

The processor's tensors go to ``generate(**batch.tensors)``; the frame indices and the input
method's budget are typed fields here, not attributes hung on the processor's output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

import torch


@dataclass(frozen=True)
class PreparedInputs:
    """One batch for the model.

    Attributes:
        tensors: the processor's ``BatchFeature`` (``input_ids [B, L]``, pixels, grids, ...).
        frame_indices: each video's source frame indices, one list per video in batch order (the
            kept-token records draw on them, :mod:`vcast.kept_records`).
        input_budget: under an input method, one dict per video (:mod:`vcast.eval.input_budget`);
            None otherwise.
    """

    tensors: Any
    frame_indices: list[list[int]]
    input_budget: Optional[list[dict[str, Any]]] = None

    def to(self, device: torch.device) -> "PreparedInputs":
        """The same batch with its tensors on ``device``."""
        return replace(self, tensors=self.tensors.to(device))
