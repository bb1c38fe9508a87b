"""Every registered method on every model family: it runs (``attach`` + ``generate`` prunes the tiny
checkpoint's video), or it is refused with its reason before anything runs.

The equality of each run with the hook-free reference is tested per family elsewhere
(``test_models_generate.py``, ``test_baselines_attach.py``, ``test_baselines_in_llm.py``,
``test_family_*.py``); this file holds the whole method x family grid to "runs or says why".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402

import vcast  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast.api import input_plan  # noqa: E402
from vcast.eval.input_budget import input_plan_refusal  # noqa: E402
from vcast.families import all_families  # noqa: E402
from vcast.models.hybrid_methods import config_layer_types, llm_method_refusal  # noqa: E402
from vcast.registry import is_input_method, is_llm_method  # noqa: E402

FAMILIES = [family.name for family in all_families()]
METHODS = vcast.available_methods()
RATIO = 0.25
LLM_RATIO = 0.6  # the tiny models have 2-4 layers: PDrop cannot average down to 0.25 over 2


@pytest.fixture(scope="module")
def loaded(tiny_dirs: dict[str, Path]) -> dict[str, tuple[Any, Any]]:
    """Per family: (its tiny model, a processor batch of one 8-frame clip)."""
    out = {}
    for name in FAMILIES:
        model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[name], attn_implementation="sdpa").eval()
        out[name] = (model, batch(name, AutoProcessor.from_pretrained(tiny_dirs[name]), ["What moves?"], [clip()]))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_every_method_runs_on_the_family_or_is_refused_with_its_reason(family: str, loaded: dict) -> None:
    model, inputs = loaded[family]
    facts = next(f for f in all_families() if f.name == family)
    ran, refused = [], []
    for method in METHODS:
        if is_input_method(method):  # it changes what the plugin reads: the plugin's own refusal, or none
            refusal = input_plan_refusal(facts.plugin_id, input_plan(method, RATIO))
            (refused if refusal else ran).append(method)
            if refusal:
                assert method in refusal and facts.plugin_id in refusal
            continue
        ratio = 1.0 if method == "vanilla" else LLM_RATIO if is_llm_method(method) else RATIO
        # with its defaults, on this model's layers (a hybrid model: the stages' layers decide)
        refusal = llm_method_refusal(facts, method, ratio=ratio, layer_types=config_layer_types(model.config) or ())
        if refusal is not None:
            with pytest.raises(ValueError) as error:
                vcast.models.attach(model, method=method, ratio=ratio)
            assert str(error.value) == refusal and facts.display in refusal and method in refusal
            refused.append(method)
            continue
        with vcast.models.attach(model, method=method, ratio=ratio) as handle, torch.no_grad():
            model.generate(**inputs, max_new_tokens=2, do_sample=False)
            stats = handle.stats
        (video,) = [segment for segment in stats.segments if segment.kind == "video"]
        if method == "vanilla":
            assert video.kept == video.total, method
        elif is_llm_method(method):
            assert stats.llm_stages and stats.final_video_tokens < video.total, method
        else:
            assert 0 < video.kept < video.total, method
        ran.append(method)
    assert sorted(ran + refused) == sorted(METHODS)
    # the tiny hybrid model's only softmax layer is its last: no in-LLM stage fits (see test_hybrid_llm_methods.py)
    assert not facts.hybrid_attention or {m for m in METHODS if is_llm_method(m)} <= set(refused)
