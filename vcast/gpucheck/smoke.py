"""``attach`` + ``generate`` for every registered method on the tiny checkpoint of each family.

The checkpoints are :func:`vcast.tiny_checkpoints.build_tiny_checkpoint`'s (real transformers
classes, random weights), loaded in the run's dtype (bf16 on CUDA) on its device; the prompt is
one 8-frame video in the family's layout (:func:`vcast.gpucheck.models.video_inputs`). Every
family of the registry is checked, the paper's first. Per method and family, the check says which
of these it got:

- **equal to the reference** (every method that works before the LLM, on every dense model; on
  a mixture-of-experts model V-CAST and the three the CPU tests sample on Qwen3-VL-MoE, as
  ``tests/test_models_generate.py`` and ``tests/test_baselines_attach.py`` do on CPU): the hooked
  ``generate`` keeps what the compressor keeps on the encoder's own tokens, and its new tokens
  equal those of the untouched model fed the pruned (or merged) prompt directly
  (:mod:`vcast.models.reference`). In fp32 the logits must agree to 1e-4 as on CPU; in bf16 to
  2e-2, and a new token may differ only where the reference's two best logits are that close (a
  near-tie, said in the detail). The reference feeds ``mm_encoder_outputs``, which transformers
  has from 5.18 on (and reads the encoder through its 5.18+ API); with an older one the check
  says so and only the "runs" part below (without the compressor comparison) is made;
- **runs** (the rest): the call prunes, keeps exactly what the compressor keeps on the encoder's
  own tokens (so its budget: ``floor(r * total)`` for most; DyCoke, the 2x2 methods on an odd
  grid, the vision sides of FlashVID and FrameFusion keep more by design, said in the detail), the
  logits are finite and exactly ``N`` new tokens come out. The methods compared with the reference
  pass this first;
- **in-LLM** methods (FastV, PDrop, ...): they run, drop tokens between layers (FrameFusion
  decides by itself), are deterministic (a second call gives the same tokens), finite logits; on a
  family that cannot host one (:mod:`vcast.models.hybrid_methods`) the check is ``skipped`` with
  the refusal ``attach`` gives;
- **input** methods (fewer frames, lower resolution): ``attach`` refuses them by design; their plan
  (:func:`vcast.input_plan`) is applied to the prompt and the unpruned model (``vanilla``) must see
  at most ``floor(r * total)`` video tokens (``total``: what the unpruned model sees of the full
  prompt). A tower that takes one input size (LLaVA-OneVision's) skips a plan that lowers the
  resolution, as the lmms-eval plugin refuses it.
"""

from __future__ import annotations

import inspect
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

import torch
import transformers

import vcast
from vcast.families import all_archs, family_of
from vcast.gpucheck.models import fitting_side, video_inputs
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report
from vcast.models.hybrid_methods import config_layer_types, llm_method_refusal
from vcast.models.reference import encode, encoder_selection, pruned_inputs, survivors
from vcast.registry import is_input_method, is_llm_method
from vcast.tiny_checkpoints import build_tiny_checkpoint

PAPER_ARCHS = ("qwen3_vl", "qwen3_vl_moe", "llava_onevision")
# The paper's families first, then every other family's archs in the registry's order.
ARCHS = PAPER_ARCHS + tuple(arch for arch in all_archs() if arch not in PAPER_ARCHS)
RATIO = 0.25
NEW_TOKENS = 4
FRAMES = 8
PATCH_SIDE = 128  # patch-based towers: 4 x 4 merged patches (112 px at 14 px patches), 16 tokens per temporal patch
MOE_EQUALITY = ("vcast", "visionzip", "avgpool_2x2", "vidcom2")  # as tests/test_baselines_attach.py samples the MoE
# As tests/test_baselines_in_llm.py: PDrop's default r keeps its first drop above 1/3 on 2-3 layers.
LLM_PARAMS = {"pdrop": {"lam": 0.5}}
OWN_SCHEDULE = ("framefusion",)  # its cost budget decides whether the in-LLM steps drop anything
# The kit's CPU mode runs every method on Qwen3-VL only and this sample on the other families (the
# CPU test suite covers them all; the CPU mode is there so the kit itself does not rot).
SAMPLE = ("vanilla", "vcast", "visionzip", "avgpool_2x2", "vidcom2", "fastv", "fewer_frames")
TOLERANCE = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-2, 2e-2)}


def reference_supported(model: Any) -> bool:
    """Whether this transformers feeds precomputed encoder outputs (``mm_encoder_outputs``, >= 5.18)."""
    return "mm_encoder_outputs" in inspect.signature(model.forward).parameters


def _generate(model: Any, inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy ``NEW_TOKENS`` new tokens ``[1, N]`` and their logits ``[N, V]`` (float32)."""
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                             return_dict_in_generate=True, output_logits=True)
    length = inputs["input_ids"].shape[1]
    return out.sequences[:, length:], torch.stack(out.logits)[:, 0].float()


def _hooked(model: Any, inputs: dict[str, Any], method: str, ratio: float, **params: Any):
    with vcast.models.attach(model, method, ratio, **params) as handle:
        tokens, logits = _generate(model, inputs)
        return tokens, logits, handle.stats, handle.adapter.positions


def _basic(tokens: torch.Tensor, logits: torch.Tensor) -> Optional[str]:
    """Why the output is wrong (not N new tokens, non-finite logits), or None."""
    if tokens.shape[1] != NEW_TOKENS:
        return f"{tokens.shape[1]} new tokens instead of {NEW_TOKENS}"
    if not torch.isfinite(logits).all():
        return "non-finite logits"
    return None


def compare_decodes(tokens: torch.Tensor, logits: torch.Tensor, ref_tokens: torch.Tensor, ref_logits: torch.Tensor,
                    dtype: torch.dtype) -> tuple[bool, str]:
    """(equal, how): the hooked decode against the reference's, within ``dtype``'s tolerance.

    Equal tokens with logits within tolerance pass. In a low-precision dtype, the first differing
    token also passes when the reference's logits for both tokens are within tolerance of each
    other there (a near-tie that rounding may break either way); the steps after it are not compared.
    """
    rtol, atol = TOLERANCE.get(dtype, TOLERANCE[torch.bfloat16])
    hooked, ref = tokens[0].tolist(), ref_tokens[0].tolist()
    steps = next((i for i, (a, b) in enumerate(zip(hooked, ref)) if a != b), len(ref))
    close = torch.allclose(logits[:steps], ref_logits[:steps], rtol=rtol, atol=atol)
    diff = (logits[:steps] - ref_logits[:steps]).abs().max().item() if steps else 0.0
    if steps == len(ref):
        return close, f"tokens equal, max |logit diff| {diff:.2e}" + ("" if close else f" > tolerance {atol:g}")
    if dtype == torch.float32:
        return False, f"token {steps} differs ({hooked[steps]} vs reference {ref[steps]})"
    gap = abs(ref_logits[steps, hooked[steps]] - ref_logits[steps, ref[steps]]).item()
    tie = gap <= atol + rtol * ref_logits[steps].abs().max().item()
    return close and tie, (f"tokens equal up to {steps}; there a near-tie (reference logits {gap:.2e} apart), "
                           f"max |logit diff| before {diff:.2e}" if tie else
                           f"token {steps} differs ({hooked[steps]} vs reference {ref[steps]}, "
                           f"reference logits {gap:.2e} apart)")


def _token_method(model: Any, inputs: dict[str, Any], method: str, equality: Optional[str],
                  dtype: torch.dtype, encoder: bool = True) -> tuple[str, str]:
    """``equality``: why the reference is not compared (None: it is); ``encoder``: whether the
    encoder API the reference helpers use is there (transformers >= 5.18)."""
    ratio = 1.0 if method == "vanilla" else RATIO
    tokens, logits, stats, positions = _hooked(model, inputs, method, ratio)
    wrong = _basic(tokens, logits)
    if wrong:
        return FAIL, wrong
    (video,) = stats.videos
    kept = f"kept {video.kept}/{video.total}"
    if method != "vanilla" and not stats.pruned:
        return FAIL, f"{kept}: nothing pruned"
    budget = math.floor(RATIO * video.total)
    if method != "vanilla" and video.kept > budget:
        kept += f" (over floor(r * total) = {budget}: the method's own budget)"
    if not encoder:
        return PASS, f"runs: {kept}, finite logits (not compared with the compressor or the reference: {equality})"
    expected = encoder_selection(model, inputs, method, ratio)
    if video.keep.tolist() != expected.keep.cpu().tolist():
        return FAIL, f"{kept}, but {method} keeps {expected.keep.numel()} others on the encoder's own tokens"
    if equality is not None:
        return PASS, f"runs: {kept}, as the compressor on the encoder's tokens; finite logits (reference: {equality})"
    with torch.no_grad():
        kwargs = pruned_inputs(model, inputs, encode(model, inputs), survivors(stats, inputs["input_ids"]), positions,
                               video_tokens=expected.tokens if expected.merges else None)
    ref_tokens, ref_logits = _generate(model, kwargs)
    equal, how = compare_decodes(tokens, logits, ref_tokens, ref_logits, dtype)
    return (PASS if equal else FAIL), f"equal to the reference: {kept}, {how}"


def _llm_method(model: Any, inputs: dict[str, Any], method: str) -> tuple[str, str]:
    params = LLM_PARAMS.get(method, {})
    tokens, logits, stats, _ = _hooked(model, inputs, method, RATIO, **params)
    wrong = _basic(tokens, logits)
    if wrong:
        return FAIL, wrong
    (video,) = stats.videos
    if not stats.llm_stages:
        return FAIL, "no in-LLM stage ran"
    final = stats.final_video_tokens
    if method not in OWN_SCHEDULE and not 0 < final < video.kept:
        return FAIL, f"the last layer sees {final} video tokens of {video.kept} entering the LLM"
    again, _, _, _ = _hooked(model, inputs, method, RATIO, **params)
    if not torch.equal(again, tokens):
        return FAIL, "a second call gave other tokens"
    return PASS, (f"in-LLM: {video.total} -> {video.kept} before the LLM -> {final} at the last layer, "
                  f"deterministic, finite logits")


def _input_method(model: Any, config: Any, method: str, side: int, full: dict[str, Any], device: torch.device,
                  dtype: torch.dtype) -> tuple[str, str]:
    """``full``: the check's full-size prompt; the unpruned model's video tokens there are the total."""
    plan = vcast.input_plan(method, RATIO)
    family = family_of(config)
    if family.fixed_resolution and plan.grid_share != 1.0:
        return SKIPPED, f"lowers the resolution; {family.fixed_resolution} (the plugin refuses it)"
    frames = plan.frames(FRAMES, family.frames_per_step)
    small = side
    if not family.fixed_resolution:
        vision = config.vision_config
        unit = vision.patch_size * vision.spatial_merge_size
        grid, _ = plan.grid(side // unit, side // unit)
        small = grid * unit
    inputs = video_inputs(config, frames, small, device, dtype)
    tokens, logits, stats, _ = _hooked(model, inputs, "vanilla", 1.0)
    wrong = _basic(tokens, logits)
    if wrong:
        return FAIL, wrong
    unpruned = _hooked(model, full, "vanilla", 1.0)[2].total_video_tokens
    seen = stats.total_video_tokens
    if seen > math.floor(RATIO * unpruned):
        return FAIL, f"the model saw {seen} video tokens, more than r x {unpruned}"
    return PASS, f"input plan: {frames} frames of {small} px, {seen} of {unpruned} video tokens, finite logits"


def _is_moe(config: Any) -> bool:
    return bool(getattr(config.text_config, "num_experts", 0))


def _load(folder: Path, device: torch.device, dtype: torch.dtype) -> Any:
    """The tiny checkpoint in ``dtype`` on ``device``, SDPA attention."""
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa")
    return model.to(device).eval()


def run(report: Report, device: torch.device, dtype: torch.dtype, archs: tuple[str, ...] = ARCHS,
        full: tuple[str, ...] = ARCHS) -> None:
    """One check per (family, method): ``smoke/<arch>/<method>``; every registered method on the
    families in ``full``, :data:`SAMPLE` on the others."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    every = vcast.available_methods()
    with tempfile.TemporaryDirectory(prefix="vcast-gpucheck-") as scratch:
        for arch in archs:
            model = _load(build_tiny_checkpoint(arch, "tiny", Path(scratch) / arch, seed=0), device, dtype)
            config = model.config
            methods = every if arch in full else [m for m in every if m in SAMPLE]
            side = fitting_side(config, PATCH_SIDE)
            inputs = video_inputs(config, FRAMES, side, device, dtype)
            no_reference = None if reference_supported(model) else (
                f"transformers {transformers.__version__} has no mm_encoder_outputs (5.18+), which the reference "
                "feeds")
            report.log(f"smoke: {arch} tiny on {device} {str(dtype).removeprefix('torch.')}, "
                       f"{inputs['input_ids'].shape[1]} prompt tokens, {len(methods)} methods")
            for method in methods:
                name = f"smoke/{arch}/{method}"
                if not report.budget.allows(0.0):
                    report.check(name, SKIPPED, "budget: no time left")
                    continue
                try:
                    refusal = llm_method_refusal(family_of(config), method, LLM_PARAMS.get(method, {}), ratio=RATIO,
                                                 layer_types=config_layer_types(config))
                    if refusal is not None:
                        status, detail = SKIPPED, f"refused by attach, as designed: {refusal}"
                    elif is_input_method(method):
                        status, detail = _input_method(model, config, method, side, inputs, device, dtype)
                    elif is_llm_method(method):
                        status, detail = _llm_method(model, inputs, method)
                    else:
                        equality = no_reference
                        if equality is None and _is_moe(config) and method not in MOE_EQUALITY:
                            equality = "on a mixture of experts the CPU tests compare only " + ", ".join(MOE_EQUALITY)
                        status, detail = _token_method(model, inputs, method, equality, dtype,
                                                       encoder=no_reference is None)
                except Exception as error:  # noqa: BLE001 - every method gets its line; the error is the detail
                    status, detail = FAIL, f"{type(error).__name__}: {error}"
                report.check(name, status, detail)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
            report.flush()
