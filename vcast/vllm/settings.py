"""What the vLLM plugin prunes with, and how many tokens it keeps, without importing vLLM.

The plugin reads its settings from the model config's ``vcast`` entry, which the user passes as
``hf_overrides={"architectures": [...], "vcast": {"method": ..., "ratio": ..., "params": {...}}}``.
Both halves of vLLM need them: the front-end processor writes as many video placeholders as will
be kept (:func:`kept_count`), and the model prunes to exactly that many (:func:`select_video`).
Both go through :func:`vcast.select`, so the count and the mask cannot disagree for a method
whose count depends only on the video's shape; :func:`check_settings` refuses the others.

A request may set its own retention ratio, ``mm_processor_kwargs={"vcast_ratio": 0.5}``
(:data:`RATIO_KWARG`; a server takes per-request processor options only when started with
``--trust-request-mm-kwargs``): :func:`request_settings` checks it where vLLM turns a ValueError into
the request's 400, and the processor hands it to the model with each video (:data:`RATIO_FIELD`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import torch

from vcast.api import select
from vcast.registry import check_params, get_method, is_llm_method, method_inputs, vllm_methods
from vcast.selection import Selection
from vcast.validation import check_ratio

# Methods that prune post-merger tokens with nothing but the tokens (and the frame grid): the
# ones that can run inside vLLM's video-pruning hook. Each says so in its facts (``vllm=True``).
VLLM_METHODS: tuple[str, ...] = vllm_methods()
# Why the others cannot (docs/vllm.md lists them per method).
_NOT_IN_VLLM = {
    "vision_attention": "needs the vision encoder's attention maps, which vLLM's fused attention kernels never form",
    "vision_keys": "needs the vision encoder's keys, which vLLM's vision tower does not expose",
    "vision_mean_query_attention": "needs the vision encoder's last-block queries and keys, which vLLM's vision tower "
                                   "does not expose",
}
# The request's own ratio, among its mm_processor_kwargs; and the per-video field that carries it from the
# front-end processor to the model (which may run in another process).
RATIO_KWARG = "vcast_ratio"
RATIO_FIELD = "vcast_video_ratio"
# Probe tensors for the count: two different contents, so a content-dependent count is caught.
_PROBE_SEEDS = (0, 1)
_PROBE_DIM = 8


@dataclass(frozen=True)
class VCastSettings:
    """The plugin's settings: ``method`` (a name from :data:`VLLM_METHODS`), ``ratio`` in (0, 1],
    ``params`` (the method's own parameters, as for :func:`vcast.select`)."""

    method: str = "vcast"
    ratio: float = 0.25
    params: Mapping[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[str, float, tuple[tuple[str, Any], ...]]:
        """A hashable form (for the count cache)."""
        return self.method, self.ratio, tuple(sorted((k, _hashable(v)) for k, v in self.params.items()))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def settings_from_config(config: Any) -> VCastSettings:
    """The :class:`VCastSettings` in a (vLLM / transformers) model config's ``vcast`` entry.

    ValueError naming the bad entry when it is missing or malformed, or the method cannot run in vLLM.
    """
    raw = getattr(config, "vcast", None)
    if raw is None:
        raise ValueError("the V-CAST vLLM model needs its settings: pass hf_overrides={'architectures': [...], "
                         "'vcast': {'method': 'vcast', 'ratio': 0.25}} (see vcast.vllm.engine_kwargs)")
    if not isinstance(raw, Mapping):
        raise ValueError(f"hf_overrides['vcast'] must be a dict, got {type(raw).__name__}: {raw!r}")
    unknown = sorted(set(raw) - {"method", "ratio", "params"})
    if unknown:
        raise ValueError(f"unknown hf_overrides['vcast'] key(s) {unknown}; expected method, ratio, params")
    params = raw.get("params") or {}
    if not isinstance(params, Mapping):
        raise ValueError(f"hf_overrides['vcast']['params'] must be a dict, got {params!r}")
    settings = VCastSettings(method=str(raw.get("method", "vcast")), ratio=check_ratio(raw.get("ratio", 0.25)),
                             params=dict(params))
    check_settings(settings)
    return settings


def request_settings(settings: VCastSettings, processor_kwargs: Mapping[str, Any]) -> VCastSettings:
    """``settings`` with the request's own ratio (``processor_kwargs[RATIO_KWARG]``, its
    ``mm_processor_kwargs``) where it sets one. ValueError naming the option and its value when it is
    not a number in (0, 1]."""
    if RATIO_KWARG not in processor_kwargs:
        return settings
    value = processor_kwargs[RATIO_KWARG]
    try:
        ratio = check_ratio(value)
    except ValueError:
        raise ValueError(f"mm_processor_kwargs {RATIO_KWARG!r} (the request's retention ratio) must be a number in "
                         f"(0, 1], got {value!r}") from None
    return replace(settings, ratio=ratio)


def without_request_options(processor_kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """``processor_kwargs`` without the plugin's own option (transformers' processor takes no such key)."""
    if RATIO_KWARG not in processor_kwargs:
        return processor_kwargs
    return {key: value for key, value in processor_kwargs.items() if key != RATIO_KWARG}


def check_settings(settings: VCastSettings) -> None:
    """ValueError naming the method or parameter that cannot run inside vLLM's pruning hook."""
    get_method(settings.method)  # unknown name: ValueError listing the known ones
    if is_llm_method(settings.method):
        raise ValueError(f"method {settings.method!r} drops tokens inside the language model; vLLM's paged KV cache "
                         f"has no hook for that, so it cannot run in vLLM (methods that can: {', '.join(VLLM_METHODS)})")
    needed = method_inputs(settings.method, settings.params.get("variant"))
    for name in needed:
        if name in _NOT_IN_VLLM:
            raise ValueError(f"method {settings.method!r} {_NOT_IN_VLLM[name]}, so it cannot run in vLLM "
                             f"(methods that can: {', '.join(VLLM_METHODS)})")
    check_params(settings.method, dict(settings.params))
    counts = {_probe_count(settings.key(), 4, 6, (2, 3), seed) for seed in _PROBE_SEEDS}
    if len(counts) > 1:
        raise ValueError(f"method {settings.method!r} with params {dict(settings.params)} keeps a number of tokens "
                         f"that depends on the video's content ({sorted(counts)} on two probes of one shape); "
                         "vLLM fixes the count before the video is encoded, so it cannot run there")


def _grid_for(settings_key: tuple, tokens_per_frame: int, grid: tuple[int, int]) -> dict[str, Any]:
    method = settings_key[0]
    return {"grid": grid} if "grid" in method_inputs(method, dict(settings_key[2]).get("variant")) else {}


@functools.lru_cache(maxsize=4096)
def _probe_count(settings_key: tuple, num_frames: int, tokens_per_frame: int, grid: tuple[int, int],
                 seed: int) -> int:
    method, ratio, params = settings_key
    generator = torch.Generator().manual_seed(seed)
    probe = torch.randn(num_frames, tokens_per_frame, _PROBE_DIM, generator=generator)
    selection = select(probe, ratio, method, **dict(params), **_grid_for(settings_key, tokens_per_frame, grid))
    if selection.merges:
        raise ValueError(f"method {method!r} with params {dict(params)} merges or reorders tokens; only pure "
                         "pruning (kept tokens are the encoder's own rows) runs inside vLLM")
    return int(selection.keep.numel())


def kept_count(settings: VCastSettings, num_frames: int, grid: tuple[int, int]) -> int:
    """How many of a video's ``num_frames * h * w`` post-merger tokens ``settings`` keeps.

    ``grid``: ``(h, w)`` merged tokens per frame. This is ``len(vcast.select(...).keep)`` on a
    probe of that shape (cached), i.e. the method's own budget rule; :func:`check_settings` has
    made sure it does not depend on the content. ValueError when it would keep no token.
    """
    tokens_per_frame = grid[0] * grid[1]
    count = _probe_count(settings.key(), num_frames, tokens_per_frame, tuple(grid), _PROBE_SEEDS[0])
    if count < 1:
        raise ValueError(f"method {settings.method!r} at ratio {settings.ratio} keeps no token of a "
                         f"{num_frames}x{tokens_per_frame}-token video; vLLM needs at least one: raise the ratio")
    return count


def select_video(frames: torch.Tensor, settings: VCastSettings, grid: tuple[int, int]) -> Selection:
    """``vcast.select`` on one video's main post-merger tokens ``frames`` [T, P, D], ``P = h * w``."""
    params = dict(settings.params)
    params.update(_grid_for(settings.key(), frames.shape[1], tuple(grid)))
    return select(frames, settings.ratio, settings.method, **params)
