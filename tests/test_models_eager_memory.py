"""The eager-score memory guard (``vcast.models.eager_memory``): an eager-score prefill whose
attention cannot fit is refused with the estimate and the free memory, before any layer runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import vcast  # noqa: E402
from vcast.models.eager_memory import (  # noqa: E402
    available_system_memory,
    check_eager_memory,
    eager_attention_bytes,
    free_memory_bytes,
)


@pytest.mark.parametrize(("dtype", "per_score", "mask"), [
    (torch.bfloat16, 2 + 4 + 2, 2),  # bf16 logits, float32 softmax, its bf16 cast; bf16 mask
    (torch.float16, 2 + 4 + 2, 2),
    (torch.float32, 4 + 4, 4),  # the cast to float32 is the softmax itself
])
def test_estimate_counts_logits_softmax_cast_and_mask(dtype: torch.dtype, per_score: int, mask: int) -> None:
    batch, heads, length = 2, 3, 10
    assert eager_attention_bytes(batch, heads, length, dtype) == batch * length * length * (heads * per_score + mask)


def test_the_estimate_grows_with_the_square_of_the_prompt() -> None:
    one = eager_attention_bytes(1, 28, 12_600, torch.bfloat16)
    assert eager_attention_bytes(1, 28, 25_200, torch.bfloat16) == 4 * one
    assert eager_attention_bytes(3, 28, 12_600, torch.bfloat16) == 3 * one


def test_refused_when_the_estimate_exceeds_the_free_memory() -> None:
    needed = eager_attention_bytes(1, 4, 1000, torch.float32)
    cpu = torch.device("cpu")
    assert check_eager_memory(1, 4, 1000, torch.float32, cpu, free_memory=lambda device: needed) == needed
    assert check_eager_memory(1, 4, 1000, torch.float32, cpu, free_memory=lambda device: None) == needed
    with pytest.raises(ValueError, match="scores='eager'") as error:
        check_eager_memory(1, 4, 1000, torch.float32, cpu, free_memory=lambda device: needed - 1)
    message = str(error.value)
    assert f"({needed} bytes)" in message and f"({needed - 1} bytes) free on cpu" in message
    assert "scores='rows'" in message


def test_free_memory_of_the_cpu_is_the_available_system_memory() -> None:
    available = available_system_memory()
    assert available > 0
    assert free_memory_bytes(torch.device("cpu")) > 0
    assert free_memory_bytes(torch.device("meta")) is None  # unknown: no check


def test_a_prompt_too_long_for_eager_scores_is_refused_before_the_first_layer(tiny_dirs: dict[str, Path]) -> None:
    """A real eager model and a text prompt of 2^18 tokens: 2^36 scores per head, terabytes of
    eager attention, refused from the shapes (nothing of that size is allocated)."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs["qwen3_vl"], attn_implementation="eager").eval()
    heads = model.config.text_config.num_attention_heads
    length = 2**18
    needed = eager_attention_bytes(1, heads, length, torch.float32)
    assert needed > 2 * available_system_memory()  # the premise: this cannot fit here
    input_ids = torch.full((1, length), 65, dtype=torch.long)
    with vcast.models.attach(model, "fastv", 0.25, layer=1, scores="eager"):
        with pytest.raises(ValueError, match=f"about {needed / 2**30:.2f} GiB per layer"), torch.no_grad():
            model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
    with vcast.models.attach(model, "fastv", 0.25, layer=1, scores="rows"), torch.no_grad():
        short = input_ids[:, :16]
        model(input_ids=short, attention_mask=torch.ones_like(short))  # the default path has no such check
