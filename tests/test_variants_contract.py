"""The variant contract of every registered method (docs/fidelity.md):

* ``paper`` is every method's first variant and its default;
* ``paper`` gives the same selection for bf16 input and for its exact float32 copy;
* every other variant runs on both dtypes and returns a valid selection;
* a variant a method does not have is refused by name.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import vcast
from vcast.models.vision_probe import stand_in_inputs
from vcast.registry import get_method, is_token_method, method_inputs, method_variants
from vcast.variants import VARIANTS

FRAMES, GRID, DIM = 16, (6, 6), 32
COMPRESSORS = [m for m in vcast.available_methods() if is_token_method(m)]
FIXED_RATIO = {"first_2x2": 0.25, "random_2x2": 0.25, "avgpool_2x2": 0.25, "vanilla": 1.0}


def _video(seed: int) -> tuple[torch.Tensor, dict]:
    """A bf16 video with a scene cut (so segment-based methods have segments) and its model inputs."""
    generator = torch.Generator().manual_seed(seed)
    scenes = torch.randn(2, 1, GRID[0] * GRID[1], DIM, generator=generator)
    drift = 0.3 * torch.randn(FRAMES, GRID[0] * GRID[1], DIM, generator=generator)
    frames = (torch.cat([scenes[0].expand(FRAMES // 2, -1, -1), scenes[1].expand(FRAMES // 2, -1, -1)]) + drift)
    return frames.to(torch.bfloat16), stand_in_inputs(("grid", "vision_attention", "vision_keys"), FRAMES, GRID,
                                                       DIM, generator)


def _select(method: str, frames: torch.Tensor, inputs: dict, **params):
    needed = {name: inputs[name] for name in method_inputs(method)}
    return vcast.select(frames, FIXED_RATIO.get(method, 0.25), method=method, **needed, **params)


@pytest.mark.parametrize("method", vcast.available_methods())
def test_paper_is_the_first_variant_and_the_default(method: str) -> None:
    variants = method_variants(method)
    assert variants[0] == "paper" and set(variants) <= set(VARIANTS)
    parameter = inspect.signature(get_method(method)).parameters.get("variant")
    if len(variants) > 1:
        assert parameter is not None and parameter.default == "paper"


@pytest.mark.parametrize("method", COMPRESSORS)
def test_paper_variant_gives_the_same_selection_for_bf16_and_float32(method: str) -> None:
    frames, inputs = _video(1)
    low = _select(method, frames, inputs, variant="paper")  # every method takes it
    high = _select(method, frames.float(), inputs)
    assert torch.equal(low.keep, high.keep), method
    assert torch.equal(low.budgets, high.budgets), method


@pytest.mark.parametrize("method, variant", [(m, v) for m in COMPRESSORS for v in method_variants(m)[1:]])
def test_every_other_variant_runs_on_both_dtypes(method: str, variant: str) -> None:
    frames, inputs = _video(2)
    for dtype in (torch.bfloat16, torch.float32):
        selection = _select(method, frames.to(dtype), inputs, variant=variant)
        keep = selection.keep
        assert keep.numel() > 0 and bool((keep[1:] > keep[:-1]).all()), (method, variant, dtype)
        assert 0 <= int(keep[0]) and int(keep[-1]) < frames.shape[0] * frames.shape[1]
        assert int(selection.budgets.sum()) == keep.numel()
        if selection.tokens is not None:
            assert selection.tokens.shape == (keep.numel(), DIM)


@pytest.mark.parametrize("method, missing", [(m, v) for m in vcast.available_methods() for v in VARIANTS
                                             if v not in method_variants(m)])
def test_a_missing_variant_is_refused_by_name(method: str, missing: str) -> None:
    """By ``vcast.select`` and by the parameter check that ``attach`` and the sweep use."""
    from vcast.registry import check_params

    with pytest.raises(ValueError, match=f"has variant\\(s\\) .*'paper'.*got '{missing}'"):
        check_params(method, {"variant": missing})
    if is_token_method(method):
        frames, inputs = _video(3)
        with pytest.raises(ValueError, match=f"got '{missing}'"):
            _select(method, frames, inputs, variant=missing)


def test_registration_refuses_malformed_variants() -> None:
    from vcast.registry import register_method

    with pytest.raises(ValueError, match="start with 'paper'"):
        register_method("x_bad_order", variants=("official", "paper"))
    with pytest.raises(ValueError, match="inputs for variants \\['official'\\]"):
        register_method("x_stray", variants=("paper",), variant_inputs={"official": ()})
    with pytest.raises(ValueError, match="takes no 'variant'"):
        register_method("x_no_param", variants=("paper", "official"))(lambda frames, ratio: None)
    assert "x_no_param" not in vcast.available_methods()  # nothing half-registered
