"""The ``vcast.models.attach`` / ``PruningHandle`` API on the tiny random-weight checkpoints."""

from __future__ import annotations

import json
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

import vcast.models  # noqa: E402
from tests.model_inputs import batch, clip  # noqa: E402
from vcast.models import SUPPORTED_CLASSES, CallStats, PruningHandle  # noqa: E402
from vcast.tiny_checkpoints import ARCHS  # noqa: E402

GENERATE = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def load(path: Path) -> nn.Module:
    """A fresh eval-mode model from a tiny checkpoint."""
    return AutoModelForImageTextToText.from_pretrained(path).eval()


@pytest.fixture(scope="module")
def processors(tiny_dirs: dict[str, Path]) -> dict[str, Any]:
    """One processor per architecture."""
    return {arch: AutoProcessor.from_pretrained(tiny_dirs[arch]) for arch in ARCHS}


@pytest.fixture(scope="module")
def models(tiny_dirs: dict[str, Path], processors: dict[str, Any]) -> dict[str, nn.Module]:
    """One model per architecture, shared by the module (every test leaves it detached).

    Each runs one vanilla forward first, so transformers' own lazily installed hooks are in
    place before any test takes a hook baseline.
    """
    loaded = {arch: load(tiny_dirs[arch]) for arch in ARCHS}
    for arch, model in loaded.items():
        logits(model, one_video(arch, processors[arch]))
    return loaded


def one_video(arch: str, processor: Any, frames: int = 8) -> Any:
    """A one-sample batch with one ``frames``-frame 128x128 video."""
    return batch(arch, processor, ["What moves?"], [clip(frames, 128, seed=0)])


def two_videos(arch: str, processor: Any) -> Any:
    """A two-sample left-padded batch, one video each (rows of different lengths)."""
    return batch(arch, processor, ["What moves?", "Describe the square and where it goes, in detail please."],
                 [clip(8, 128, seed=1), clip(8, 128, seed=2)])


def hook_count(model: nn.Module) -> int:
    """Forward hooks and pre-hooks on ``model`` and all its submodules."""
    return sum(len(m._forward_pre_hooks) + len(m._forward_hooks) for m in model.modules())


def hooks(model: nn.Module) -> dict[str, tuple[list[Any], list[Any]]]:
    """Every submodule's forward pre-hooks and hooks (transformers installs some of its own
    lazily, on the first forward: output-capturing hooks on LLaVA's vision layers)."""
    return {name: (list(m._forward_pre_hooks.values()), list(m._forward_hooks.values()))
            for name, m in model.named_modules()}


def vcast_hooks(model: nn.Module) -> list[str]:
    """Submodules carrying a hook owned by a :class:`PruningHandle`."""
    return [name for name, (pre, post) in hooks(model).items()
            if any(isinstance(getattr(hook, "__self__", None), PruningHandle) for hook in pre + post)]


def assert_no_hooks(model: nn.Module, baseline: dict[str, tuple[list[Any], list[Any]]] | None = None) -> None:
    """No vcast hook on any submodule, nor a global one; with ``baseline``, the hooks are exactly those."""
    assert vcast_hooks(model) == []
    if baseline is not None:
        assert hooks(model) == baseline
    assert not nn.modules.module._global_forward_hooks
    assert not nn.modules.module._global_forward_pre_hooks


def vision_modules(model: nn.Module) -> list[nn.Module]:
    """The vision-side modules the adapters hook."""
    base = model.model
    if hasattr(base, "visual"):
        return [base.visual]
    return [base.vision_tower, base.multi_modal_projector]


def class_dicts(model: nn.Module) -> dict[type, dict[str, Any]]:
    """``dict(vars(cls))`` for every class in the MROs of the model, its embedder, LM and vision modules."""
    snapshot: dict[type, dict[str, Any]] = {}
    for module in [model, model.model, model.model.language_model, *vision_modules(model)]:
        for cls in type(module).__mro__:
            snapshot[cls] = dict(vars(cls))
    return snapshot


def assert_same_classes(before: dict[type, dict[str, Any]]) -> None:
    """Each class dict has the same keys bound to the very same objects as in ``before``."""
    for cls, attrs in before.items():
        now = dict(vars(cls))
        assert now.keys() == attrs.keys(), (cls, set(now) ^ set(attrs))
        changed = [key for key in attrs if now[key] is not attrs[key]]
        assert changed == [], (cls, changed)


def input_token(model: nn.Module, kind: str) -> int:
    """The placeholder token id of ``kind`` in ``model``'s prompts."""
    config = model.config
    if hasattr(config, "video_token_index"):
        return config.video_token_index if kind == "video" else config.image_token_index
    return config.video_token_id if kind == "video" else config.image_token_id


def logits(model: nn.Module, inputs: Any) -> torch.Tensor:
    """``model(**inputs).logits`` without autograd."""
    with torch.no_grad():
        return model(**inputs).logits


def generate(model: nn.Module, inputs: Any) -> torch.Tensor:
    """Greedy generate of exactly 6 new tokens (5 decode steps after the prefill)."""
    with torch.no_grad():
        return model.generate(**inputs, **GENERATE)


# Bad arguments ----------------------------------------------------------------------------------
def test_unsupported_model_type_error() -> None:
    """A non-supported module: TypeError naming its class and the supported ones."""
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError) as error:
        vcast.models.attach(model)
    message = str(error.value)
    assert "Linear" in message
    for name in SUPPORTED_CLASSES:
        assert name in message
    assert hook_count(model) == 0


BAD_ARGS = [
    pytest.param({"method": "bogus"}, "'bogus'", id="method"),
    pytest.param({"tau2": 1}, "'tau2'", id="unknown_param"),
    pytest.param({"ratio": 0}, "0", id="ratio_0"),
    pytest.param({"ratio": 1.5}, "1.5", id="ratio_1.5"),
    pytest.param({"ratio": float("nan")}, "nan", id="ratio_nan"),
    pytest.param({"ratio": "0.5"}, "'0.5'", id="ratio_str"),
    pytest.param({"compress_images": "yes"}, "'yes'", id="compress_images"),
    # parameter values are checked at attach, not at the first forward
    pytest.param({"tau": 0}, "tau", id="tau_0"),
    pytest.param({"k_min": -1}, "k_min", id="k_min_negative"),
    pytest.param({"allocation": "greedy"}, "'greedy'", id="allocation"),
]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kwargs,named", BAD_ARGS)
def test_bad_arguments_value_error(arch: str, kwargs: dict[str, Any], named: str,
                                   models: dict[str, nn.Module]) -> None:
    """Each bad argument raises a ValueError naming it, leaves no hooks, and blocks no later attach."""
    model = models[arch]
    baseline = hooks(model)
    with pytest.raises(ValueError) as error:
        vcast.models.attach(model, **kwargs)
    assert named in str(error.value)
    assert_no_hooks(model, baseline)
    with vcast.models.attach(model) as handle:  # the failed attach left no registration behind
        assert handle.attached
    assert_no_hooks(model, baseline)


@pytest.mark.parametrize("arch,positions", [("qwen3_vl", "compact"), ("qwen3_vl_moe", "compact"),
                                            ("qwen3_vl", "bogus"), ("llava_onevision", "bogus")])
def test_bad_positions_value_error(arch: str, positions: str, models: dict[str, nn.Module]) -> None:
    """A position policy the architecture does not offer: ValueError naming it, no hooks."""
    model = models[arch]
    baseline = hooks(model)
    with pytest.raises(ValueError, match=rf"positions='{positions}'"):
        vcast.models.attach(model, positions=positions)
    assert_no_hooks(model, baseline)
    with vcast.models.attach(model) as handle:
        assert handle.attached
    assert_no_hooks(model, baseline)


@pytest.mark.parametrize("arch", ARCHS)
def test_failed_attach_on_fresh_model_leaves_hooks_empty(arch: str, tiny_dirs: dict[str, Path]) -> None:
    """On a never-run model (no hooks at all), every rejected attach leaves every hook dict empty."""
    model = load(tiny_dirs[arch])
    assert hook_count(model) == 0
    bad = [{"method": "bogus"}, {"tau2": 1}, {"ratio": 0}, {"ratio": float("nan")}, {"compress_images": "yes"},
           {"positions": "bogus"}]
    for kwargs in bad:
        with pytest.raises(ValueError):
            vcast.models.attach(model, **kwargs)
        assert hook_count(model) == 0, kwargs
    with vcast.models.attach(model) as handle:
        assert handle.attached and hook_count(model) > 0
    assert hook_count(model) == 0


@pytest.mark.parametrize("positions", ["compact", "original"])
def test_llava_position_policies_accepted(positions: str, models: dict[str, nn.Module]) -> None:
    """LLaVA takes both policies; the handle reports the chosen one."""
    with vcast.models.attach(models["llava_onevision"], positions=positions) as handle:
        assert handle.adapter.positions == positions
        assert f"positions={positions!r}" in repr(handle)


# Attach / detach lifecycle ----------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_attach_twice_and_reattach(arch: str, models: dict[str, nn.Module]) -> None:
    """A second attach is refused; detach (idempotent) frees the model for a new handle."""
    model = models[arch]
    baseline = hooks(model)
    first = vcast.models.attach(model)
    try:
        assert isinstance(first, PruningHandle) and first.attached
        attached = hooks(model)
        assert vcast_hooks(model) != []
        with pytest.raises(ValueError, match="already has a vcast handle attached"):
            vcast.models.attach(model, ratio=0.5)
        assert hooks(model) == attached  # the refused attach added nothing
        assert first.attached
    finally:
        first.detach()
    assert not first.attached
    assert_no_hooks(model, baseline)
    first.detach()  # twice is fine
    assert_no_hooks(model, baseline)

    second = vcast.models.attach(model, ratio=0.5)
    try:
        assert second.attached and second.ratio == 0.5
        attached = hooks(model)
        first.detach()  # a stale handle's detach does not disturb the new one
        assert second.attached and hooks(model) == attached
        with pytest.raises(ValueError, match="already"):
            vcast.models.attach(model)
    finally:
        second.detach()
    assert_no_hooks(model, baseline)


@pytest.mark.parametrize("arch", ARCHS)
def test_context_manager_detaches(arch: str, models: dict[str, nn.Module]) -> None:
    """``with attach(...) as h`` detaches on exit, also when the body raises (which propagates)."""
    model = models[arch]
    baseline = hooks(model)
    with vcast.models.attach(model) as handle:
        assert isinstance(handle, PruningHandle) and handle.attached
        assert vcast_hooks(model) != []
    assert not handle.attached
    assert_no_hooks(model, baseline)

    with pytest.raises(RuntimeError, match="boom"):
        with vcast.models.attach(model) as handle:
            assert handle.attached
            raise RuntimeError("boom")
    assert not handle.attached
    assert_no_hooks(model, baseline)
    vcast.models.attach(model).detach()  # free again


# No global change ---------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_no_global_change(arch: str, tiny_dirs: dict[str, Path], processors: dict[str, Any]) -> None:
    """Attaching to one instance touches no class and no other instance of the same checkpoint."""
    inputs = one_video(arch, processors[arch])
    pruned, other = load(tiny_dirs[arch]), load(tiny_dirs[arch])
    vanilla_logits = logits(other, inputs)
    vanilla_tokens = generate(other, inputs)
    generate(pruned, inputs)  # warm up any lazy class-level state before the snapshot
    before = class_dicts(pruned)
    baseline, other_hooks = hooks(pruned), hooks(other)

    handle = vcast.models.attach(pruned, ratio=0.25)
    try:
        assert_same_classes(before)
        generate(pruned, inputs)
        assert handle.stats is not None and handle.stats.pruned
        assert_same_classes(before)
        # The other instance is untouched while the first one is attached and pruning.
        assert hooks(other) == other_hooks
        assert torch.equal(logits(other, inputs), vanilla_logits)
        assert torch.equal(generate(other, inputs), vanilla_tokens)
        assert logits(pruned, inputs).shape[1] < vanilla_logits.shape[1]  # pruning does happen
        assert_same_classes(before)
    finally:
        handle.detach()
    assert_same_classes(before)
    assert_no_hooks(pruned, baseline)


@pytest.mark.parametrize("arch", ARCHS)
def test_detach_restores_logits(arch: str, models: dict[str, nn.Module], processors: dict[str, Any]) -> None:
    """After detach the model gives bit-identical logits to before attach (padded two-row batch)."""
    model = models[arch]
    inputs = two_videos(arch, processors[arch])
    assert bool((inputs["attention_mask"] == 0).any())  # really padded
    before = logits(model, inputs)
    baseline = hooks(model)
    handle = vcast.models.attach(model, ratio=0.25)
    try:
        during = logits(model, inputs)
        assert handle.stats is not None and handle.stats.pruned
        assert len(handle.stats.videos) == 2
        assert during.shape[1] < before.shape[1]
    finally:
        handle.detach()
    assert_no_hooks(model, baseline)
    assert torch.equal(logits(model, inputs), before)


# Stats ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_stats_after_generate(arch: str, models: dict[str, nn.Module], processors: dict[str, Any]) -> None:
    """``handle.stats`` describes the last generate call; a second call replaces it."""
    model, processor = models[arch], processors[arch]
    inputs = one_video(arch, processor, frames=8)
    baseline = hooks(model)
    with vcast.models.attach(model, method="vcast", ratio=0.25) as handle:
        assert handle.stats is None
        out = generate(model, inputs)
        assert out.shape[1] == inputs["input_ids"].shape[1] + 6
        stats = handle.stats
        assert isinstance(stats, CallStats)
        assert stats.method == "vcast" and stats.ratio == 0.25 and stats.pruned
        assert len(stats.segments) == 1 and len(stats.videos) == 1
        video = stats.videos[0]
        assert video.sample == 0 and video.kind == "video"
        assert video.total == video.frames * video.tokens_per_frame > 0
        assert video.kept == sum(video.budgets) == video.keep.numel()
        assert video.kept == math.floor(0.25 * video.total)
        assert len(video.budgets) == video.frames
        keep = video.keep
        assert keep.dtype == torch.long
        assert bool((keep[1:] > keep[:-1]).all())
        assert int(keep.min()) >= 0 and int(keep.max()) < video.total
        assert video.positions.shape == (video.total,)
        assert bool((inputs["input_ids"][0, video.positions] == input_token(model, "video")).all())
        assert stats.tokens_before == [int(inputs["attention_mask"][0].sum())]
        assert stats.tokens_after[0] == stats.tokens_before[0] - (video.total - video.kept)
        assert stats.decode_steps == 5
        for seconds in (stats.vision_s, stats.selection_s, stats.prefill_s, stats.decode_s):
            assert seconds > 0
        assert stats.peak_memory_bytes is not None and stats.peak_memory_bytes > 0
        assert stats.memory_source == "process_peak_rss"
        assert stats.timer == "perf_counter"
        assert stats.kept_video_tokens == video.kept and stats.total_video_tokens == video.total
        as_dict = stats.as_dict()
        decoded = json.loads(json.dumps(as_dict))
        assert decoded["kept_video_tokens"] == video.kept
        assert decoded["total_video_tokens"] == video.total
        assert decoded["segments"][0]["keep"] == keep.tolist()
        assert handle.stats is stats  # resolved once, then cached

        shorter = one_video(arch, processor, frames=4)
        generate(model, shorter)
        second = handle.stats
        assert second is not stats
        assert len(second.videos) == 1
        assert second.total_video_tokens == video.total // 2
        assert second.kept_video_tokens == math.floor(0.25 * second.total_video_tokens)
        assert second.tokens_before == [int(shorter["attention_mask"][0].sum())] != stats.tokens_before
        assert second.decode_steps == 5
    assert_no_hooks(model, baseline)


@pytest.mark.parametrize("arch", ARCHS)
def test_stats_ratio_one_keeps_everything(arch: str, models: dict[str, nn.Module],
                                          processors: dict[str, Any]) -> None:
    """Ratio 1: every token kept, nothing re-laid, generate output equals the vanilla output."""
    model = models[arch]
    inputs = one_video(arch, processors[arch])
    vanilla = generate(model, inputs)
    with vcast.models.attach(model, ratio=1.0) as handle:
        out = generate(model, inputs)
        stats = handle.stats
    assert torch.equal(out, vanilla)
    assert not stats.pruned, (stats.tokens_before, stats.tokens_after)
    assert stats.kept_video_tokens == stats.total_video_tokens > 0
    assert stats.tokens_after == stats.tokens_before


@pytest.mark.parametrize("arch", ARCHS)
def test_embedder_called_directly_prunes_and_records(arch: str, models: dict[str, nn.Module],
                                                     processors: dict[str, Any]) -> None:
    """``model.model(**inputs)`` (no top-level forward) still starts a call: stats describe it."""
    model = models[arch]
    inputs = one_video(arch, processors[arch])
    with torch.no_grad(), vcast.models.attach(model, ratio=0.25) as handle:
        hidden = model.model(**inputs).last_hidden_state
        stats = handle.stats
    assert stats is not None and stats.pruned
    (video,) = stats.segments
    assert hidden.shape[1] == stats.tokens_after[0] == stats.tokens_before[0] - (video.total - video.kept)
