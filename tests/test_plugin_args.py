"""The model arguments vcast.eval.plugin_args declares are the plugins' own, and what it refuses
the plugins refuse too (before loading a model)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from vcast.eval.plugin_args import (MIN_FRAMES, PLUGIN_ARGS, check_frames, model_arg_problem,
                                    model_args_problem)
from vcast.eval.video import qwen_frame_count
from vcast.families import all_families, get_family


def _init_args(cls: type) -> set[str]:
    """Named parameters of ``cls.__init__`` and its vcast bases' (``self`` and ``**kwargs`` left out)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("vcast.") and "__init__" in vars(klass):
            for param in inspect.signature(klass.__init__).parameters.values():
                if param.name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                    names.add(param.name)
    return names


def test_declared_model_args_are_the_plugins_signatures() -> None:
    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.eval.manifests import MODELS
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL
    from vcast.vllm.lmms_plugin import VCastVLLM

    classes = {family.plugin_id: family.load("plugin") for family in all_families()}
    classes["vcast_vllm"] = VCastVLLM
    assert classes["vcast_qwen3_vl"] is VCastQwen3VL and classes["vcast_llava_ov"] is VCastLlavaOV
    assert set(classes) == set(MODELS) == set(PLUGIN_ARGS) == set(MIN_FRAMES)
    for plugin, cls in classes.items():
        assert set(PLUGIN_ARGS[plugin]) == _init_args(cls), plugin


def test_qwen3vl_reads_at_least_one_temporal_patch() -> None:
    temporal_patch = get_family("qwen3_vl").frames_per_step
    assert temporal_patch == MIN_FRAMES["vcast_qwen3_vl"] == 2
    with pytest.raises(ValueError, match="must be >= 2"):
        qwen_frame_count(1, 40, temporal_patch)
    assert qwen_frame_count(2, 40, temporal_patch) == 2
    with pytest.raises(ValueError, match=r"frames=1: Qwen3-VL \(vcast_qwen3_vl\) reads at least 2 frames"):
        check_frames("vcast_qwen3_vl", 1)
    check_frames("vcast_llava_ov", 1)
    check_frames("someone_elses_plugin", 1)


def test_the_qwen_plugin_refuses_one_frame_before_loading_anything(tmp_path: Path) -> None:
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    # no checkpoint exists at this path: the refusal must come first
    with pytest.raises(ValueError, match="reads at least 2 frames"):
        VCastQwen3VL(pretrained=str(tmp_path / "nothing"), max_num_frames=1)


def test_model_args_problems_name_the_key_and_the_right_place() -> None:
    assert model_arg_problem("vcast_qwen3_vl", "max_pixels") is None
    assert model_arg_problem("vcast_qwen3_vl", "tau", ("tau", "k_min")) is None  # a method parameter passes through
    assert "use model.pretrained instead" in model_arg_problem("vcast_qwen3_vl", "pretrained")
    assert "set by the sweep for each cell" in model_arg_problem("vcast_qwen3_vl", "efficiency_dir")
    assert "read by nothing: vcast_llava_ov takes" in model_arg_problem("vcast_llava_ov", "max_pixels")
    assert model_arg_problem("someone_elses_plugin", "anything") is None
    assert model_args_problem("vcast_qwen3_vl", {"attn_implementation": "sdpa", "max_pixels": 16384}) is None
    assert "attn_implementation must be one of sdpa, eager, flash_attention_2, got 'flash'" in model_args_problem(
        "vcast_qwen3_vl", {"attn_implementation": "flash"})
    assert "dtype must be 'auto' or one of" in model_args_problem("vcast_llava_ov", {"dtype": "fp16"})
    assert "min_pixels (9000) must not exceed model.args.max_pixels (4096)" in model_args_problem(
        "vcast_qwen3_vl", {"min_pixels": 9000, "max_pixels": 4096})
