"""Greedy decoding of a hooked model and of its hook-free reference (the pruned prompt fed with the
original positions, :mod:`vcast.models.reference`), for the families' equality tests."""

from __future__ import annotations

from typing import Any, Optional

import torch

from vcast.models.reference import encode, pruned_inputs, survivors


def greedy(model: Any, inputs: Any, new_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sequences [B, L + new_tokens], logits [new_tokens, B, V])`` of greedy decoding, exactly
    ``new_tokens`` new tokens."""
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                             return_dict_in_generate=True, output_logits=True)
    return out.sequences, torch.stack(out.logits)


def reference(model: Any, inputs: Any, stats: Any, new_tokens: int,
              video_tokens: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """New tokens ``[B, new_tokens]`` and logits of the pruned prompt (the survivors of ``stats``;
    ``video_tokens``: a merging method's tokens) fed to the model without hooks."""
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]),
                               video_tokens=video_tokens)
    sequences, logits = greedy(model, kwargs, new_tokens)
    return sequences[:, kwargs["input_ids"].shape[1]:], logits


def assert_hooked_equals_reference(model: Any, inputs: Any, method: str, ratio: float, new_tokens: int,
                                   tolerance: dict[str, float]) -> None:
    """``attach(model, method, ratio)``'s greedy decode keeps what the compressor keeps on the
    encoder's own tokens, prunes, and gives the reference's new tokens, its logits within ``tolerance``
    (``torch.testing.assert_close``'s ``rtol`` / ``atol``) and in its dtype."""
    import vcast
    from vcast.models.reference import encoder_selection

    length = inputs["input_ids"].shape[1]
    expected = encoder_selection(model, inputs, method, ratio)
    with vcast.models.attach(model, method, ratio) as handle:
        sequences, logits = greedy(model, inputs, new_tokens)
        stats = handle.stats
    (video,) = stats.segments
    assert video.keep.tolist() == expected.keep.tolist() and video.merged == expected.merges
    assert video.kept < video.total
    tokens, ref_logits = reference(model, inputs, stats, new_tokens, expected.tokens if expected.merges else None)
    assert sequences[:, length:].tolist() == tokens.tolist()
    assert logits.dtype == ref_logits.dtype
    torch.testing.assert_close(logits.float(), ref_logits.float(), **tolerance)
