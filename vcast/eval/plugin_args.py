"""What each vcast lmms-eval plugin takes as ``model_args``, and what it refuses: facts the sweep
checks before any job starts, without importing lmms-eval or loading a model.

``tests/test_plugin_args.py`` holds these lists equal to the plugins' own signatures, so a model
argument added to a plugin cannot be refused here (nor a removed one accepted). Any other
``key=value`` a plugin receives goes to the pruning method as a parameter (``tau=0.7``), which
:func:`vcast.registry.check_params` checks.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from vcast.families import all_families

# VCastLMM (vcast/eval/plugin.py): every Hugging Face plugin.
HF_ARGS = ("pretrained", "method", "ratio", "max_num_frames", "attn_implementation", "batch_size", "device_map",
           "device", "dtype", "positions", "compress_images", "efficiency_dir", "missing_visuals", "warmup",
           "prefetch", "record_kept", "use_cache", "max_batch_size")
VLLM_ARGS = ("pretrained", "method", "ratio", "max_num_frames", "min_pixels", "max_pixels", "total_pixels",
             "system_prompt", "batch_size",
             "tensor_parallel_size", "dtype", "max_model_len", "gpu_memory_utilization", "kv_cache_memory_bytes",
             "enforce_eager", "max_videos", "max_images", "seed", "efficiency_dir", "missing_visuals", "record_kept",
             "max_batch_size")

# The vLLM backend (vcast.vllm) serves one family's checkpoints: its plugin id, display name and fewest frames.
VLLM_PLUGIN, VLLM_DISPLAY, VLLM_MIN_FRAMES = "vcast_vllm", "vLLM's Qwen3-VL", 2

PLUGIN_ARGS: dict[str, tuple[str, ...]] = {
    **{family.plugin_id: (*HF_ARGS, *family.plugin_args) for family in all_families()},
    VLLM_PLUGIN: VLLM_ARGS,
}

# A family whose ViT packs 2 frames into one temporal patch cannot read fewer (Family.min_frames).
MIN_FRAMES: dict[str, int] = {**{family.plugin_id: family.min_frames for family in all_families()},
                              VLLM_PLUGIN: VLLM_MIN_FRAMES}
FAMILY = {**{family.plugin_id: family.display for family in all_families()}, VLLM_PLUGIN: VLLM_DISPLAY}

ATTN_IMPLEMENTATIONS = (None, "sdpa", "eager", "flash_attention_2")
DTYPE_NAMES = ("bfloat16", "float16", "float32")

# model_args the sweep writes itself from other keys: set them there, or the cell's record
# (and so its identity) would say something other than what ran.
SWEEP_OWNED = {
    "pretrained": "model.pretrained",
    "method": "method=<a config of configs/method>",
    "ratio": "ratio",
    "max_num_frames": "frames",
    "batch_size": "batch_size",
    "efficiency_dir": None,   # each cell's own folder
    "max_batch_size": None,   # lmms-eval's CLI passes it
}


def min_frames(plugin: str) -> int:
    """The fewest frames ``plugin`` can read (1 for a plugin vcast does not know)."""
    return MIN_FRAMES.get(plugin, 1)


def check_frames(plugin: str, frames: int) -> None:
    """ValueError naming ``frames`` when ``plugin``'s model family cannot read that few."""
    low = min_frames(plugin)
    if isinstance(frames, int) and frames < low:  # a non-integer is check_int's to name
        raise ValueError(f"frames={frames}: {FAMILY.get(plugin, plugin)} ({plugin}) reads at least {low} frames "
                         f"(max_num_frames must be >= {low})")


def model_arg_problem(plugin: str, key: str, method_params: tuple[str, ...] = ()) -> Optional[str]:
    """Why model argument ``key`` must not be given under ``plugin`` (a model config's
    ``args.<key>``), or None: a key the plugin does not take and the method (whose parameters are
    ``method_params``) does not either, or a key the sweep sets from another key (named).
    A plugin vcast does not know is not checked."""
    accepted = PLUGIN_ARGS.get(plugin)
    if accepted is None:
        return None
    if key in SWEEP_OWNED:
        where = SWEEP_OWNED[key]
        return f"model.args.{key} is set by the sweep" + (f": use {where} instead" if where else " for each cell")
    if key not in accepted and key not in method_params:
        settable = sorted(set(accepted) - set(SWEEP_OWNED))
        return (f"model.args.{key} is read by nothing: {plugin} takes {', '.join(settable)} "
                "(a method's parameters go under method.params)")
    return None


def model_args_problem(plugin: str, args: Mapping[str, Any], method_params: tuple[str, ...] = ()) -> Optional[str]:
    """Why ``args`` (a model config's ``args``) cannot run under ``plugin``, or None: any key
    :func:`model_arg_problem` refuses, and the values the plugin would refuse only after
    starting (attention, dtype, pixel bounds)."""
    for key in args:
        problem = model_arg_problem(plugin, key, method_params)
        if problem:
            return problem
    if args.get("attn_implementation", "sdpa") not in ATTN_IMPLEMENTATIONS:
        return (f"model.args.attn_implementation must be one of {', '.join(map(str, ATTN_IMPLEMENTATIONS[1:]))}, "
                f"got {args['attn_implementation']!r}")
    if args.get("dtype", "auto") not in ("auto", *DTYPE_NAMES):
        return f"model.args.dtype must be 'auto' or one of {', '.join(DTYPE_NAMES)}, got {args['dtype']!r}"
    low, high = args.get("min_pixels"), args.get("max_pixels")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        return f"model.args.min_pixels ({low}) must not exceed model.args.max_pixels ({high})"
    return None
