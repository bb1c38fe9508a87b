"""Attention rows computed from a layer's input equal the eager attention weights of the real
models (Qwen2 inside LLaVA-OneVision, Qwen3-VL with q/k norms and MRoPE, its MoE variant),
for the last token and for rows in the middle, in a left-padded batch too."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402

from tests.model_inputs import batch, clip  # noqa: E402
from vcast.models.attention_rows import attention_rows  # noqa: E402
from vcast.families import family_for_arch  # noqa: E402
from vcast.tiny_checkpoints import ARCHS as ALL_ARCHS  # noqa: E402

# The rows of the paper's softmax families; a hybrid family's (read at its softmax layers only) are
# tested in tests/test_hybrid_llm_methods.py.
ARCHS = tuple(arch for arch in ALL_ARCHS if not family_for_arch(arch).hybrid_attention)


def run_capturing(model: Any, inputs: Any, layer: int) -> tuple[Any, Any, dict[str, Any]]:
    """(the eager model's output with attentions, the attention module of ``layer``, the hidden
    states and position embeddings that module received)."""
    attention = model.model.language_model.layers[layer].self_attn
    captured: dict[str, Any] = {}

    def keep(module: Any, args: tuple, kwargs: dict) -> None:
        captured.update(hidden=kwargs["hidden_states"], position_embeddings=kwargs["position_embeddings"])

    hook = attention.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            out = model(**inputs, output_attentions=True)
    finally:
        hook.remove()
    return out, attention, captured


def eager_weights_and_rows(arch: str, tiny_dirs: dict[str, Path], inputs: Any, layer: int,
                           rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the eager model's own weights of ``layer`` at ``rows`` [B, H, R, S], ours from its input)."""
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation="eager").eval()
    out, attention, captured = run_capturing(model, inputs, layer)
    mask = inputs.get("attention_mask")
    with torch.no_grad():
        ours = attention_rows(attention, captured["hidden"], captured["position_embeddings"], rows,
                              None if mask is None else mask.bool())
    return out.attentions[layer][:, :, rows].float(), ours


@pytest.mark.parametrize("arch", ARCHS)
def test_rows_equal_the_eager_weights(arch: str, tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    length = inputs["input_ids"].shape[1]
    rows = torch.tensor([3, length // 2, length - 1])
    monkeypatch.setattr("vcast.models.attention_rows.CHUNK_ELEMENTS", 3 * length)  # one head per chunk
    for layer in (0, 1):
        expected, ours = eager_weights_and_rows(arch, tiny_dirs, inputs, layer, rows)
        torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
        assert torch.allclose(ours.sum(-1), torch.ones_like(ours.sum(-1)))
        assert float(ours[..., 0, 4:].abs().max()) == 0.0  # row 3 sees no later key


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_padded_keys_get_no_attention(arch: str, tiny_dirs: dict[str, Path]) -> None:
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?", "Which way does the square move, left or right?"],
                   [clip(seed=1), clip(seed=2)])
    mask = inputs["attention_mask"]
    assert not bool(mask.all())  # the first row is left-padded
    length = mask.shape[1]
    rows = torch.tensor([length - 1])
    expected, ours = eager_weights_and_rows(arch, tiny_dirs, inputs, 1, rows)
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-6)
    assert float(ours[0][..., ~mask[0].bool()].abs().max()) == 0.0


@pytest.mark.parametrize("arch", ARCHS)
def test_model_dtype_rows_are_the_eager_bf16_weights_bit_for_bit(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """score_dtype="model": q k^T and its scaling in bf16, float32 softmax rounded to bf16, as the
    eager kernel yields its weights (on CPU: bit-equal); float32 rows are not."""
    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves?"], [clip()])
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation="eager",
                                                        dtype=torch.bfloat16).eval()
    bf16_inputs = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in inputs.items()}
    out, attention, captured = run_capturing(model, bf16_inputs, 1)
    length = inputs["input_ids"].shape[1]
    rows = torch.tensor([length // 2, length - 1])
    with torch.no_grad():
        ours = attention_rows(attention, captured["hidden"], captured["position_embeddings"], rows,
                              score_dtype="model")
        float_rows = attention_rows(attention, captured["hidden"], captured["position_embeddings"], rows)
    expected = out.attentions[1][:, :, rows]
    assert ours.dtype == torch.bfloat16 and torch.equal(ours, expected)
    assert float_rows.dtype == torch.float32 and not torch.equal(float_rows, expected.float())


def test_divide_scales_by_sqrt_head_dim() -> None:
    """scale="divide": q k^T / sqrt(head_dim) (PDrop's manual scores), not * scaling; float32 rounds differently."""
    torch.manual_seed(0)
    module = nn.Module()
    module.q_proj, module.k_proj = nn.Linear(8, 2 * 128, bias=False), nn.Linear(8, 2 * 128, bias=False)
    module.head_dim, module.scaling, module.num_key_value_groups = 128, 128**-0.5, 1
    hidden = torch.randn(1, 40, 8) * 3
    rows = torch.tensor([39])
    divided = attention_rows(module, hidden, (None, None), rows, rotary=False, scale="divide")
    multiplied = attention_rows(module, hidden, (None, None), rows, rotary=False)
    q = module.q_proj(hidden[:, 39:]).view(1, 1, 2, 128).transpose(1, 2)
    k = module.k_proj(hidden).view(1, 40, 2, 128).transpose(1, 2)
    logits = torch.matmul(q, k.transpose(-1, -2))
    assert torch.equal(divided, (logits / math.sqrt(128)).softmax(-1))
    assert torch.equal(multiplied, (logits * 128**-0.5).softmax(-1))
    assert not torch.equal(divided, multiplied)
