"""A tiny Qwen3-VL checkpoint that vLLM's CPU attention accepts (``make demo-vllm``, the bug
reproductions of :mod:`vcast.vllm.repro`, benchmarks, tests).

vLLM's CPU attention rejects the ``tiny`` checkpoints' text head_dim 16; 32 and 64 work. This
builds :func:`vcast.tiny_checkpoints.build_tiny_checkpoint`'s ``tiny`` checkpoint (its tokenizer,
processor, vision tower sizes) and replaces the model with one whose text tower has ``head_dim`` (MRoPE
sections rescaled to ``head_dim / 2``), seeded random weights again. No change to the ``tiny``
size itself. The MoE variant also gets ``norm_topk_prob`` and expert MLPs of ``hidden / 4`` and is
saved with its experts in the released checkpoints' layout (what vLLM's loader reads).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch

from vcast.tiny_checkpoints import build_tiny_checkpoint

logger = logging.getLogger(__name__)

VLLM_CPU_HEAD_DIM = 32


def mrope_section(head_dim: int) -> list[int]:
    """Interleaved-MRoPE sections summing to ``head_dim / 2``, t getting half, h and w a quarter
    each (``[8, 4, 4]`` for 32), as ``[4, 2, 2]`` does for the tiny tower's 16."""
    half = head_dim // 2
    if head_dim % 8 or head_dim < 8:
        raise ValueError(f"head_dim must be a positive multiple of 8, got {head_dim}")
    return [half // 2, half // 4, half // 4]


def build_vllm_checkpoint(arch: str, out_dir: str | os.PathLike[str], seed: int = 0, *,
                          head_dim: int = VLLM_CPU_HEAD_DIM, overwrite: bool = False) -> Path:
    """Write the ``tiny`` ``arch`` checkpoint (``qwen3_vl`` or ``qwen3_vl_moe``) with text head_dim
    ``head_dim`` into ``out_dir``; the same seed gives the same weights."""
    if arch not in ("qwen3_vl", "qwen3_vl_moe"):
        raise ValueError(f"arch must be qwen3_vl or qwen3_vl_moe for vLLM, got {arch!r}")
    import transformers

    out = build_tiny_checkpoint(arch, "tiny", out_dir, seed=seed, overwrite=overwrite)
    config_path = out / "config.json"
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    raw["text_config"]["head_dim"] = head_dim
    raw["text_config"]["rope_parameters"]["mrope_section"] = mrope_section(head_dim)
    if arch == "qwen3_vl_moe":
        # vLLM's Qwen3-MoE reads it (the released configs carry it); transformers' Qwen3-VL-MoE router
        # always renormalises the top-k weights, which is what True means.
        raw["text_config"]["norm_topk_prob"] = True
        # Experts are saved in the released checkpoints' layout below; with 2 * I == hidden (the tiny's
        # 2 * 32 == 64) transformers could not tell gate_up_proj's layouts apart by shape.
        raw["text_config"]["moe_intermediate_size"] = raw["text_config"]["hidden_size"] // 4
    config_cls = transformers.Qwen3VLMoeConfig if arch == "qwen3_vl_moe" else transformers.Qwen3VLConfig
    model_cls = (transformers.Qwen3VLMoeForConditionalGeneration if arch == "qwen3_vl_moe"
                 else transformers.Qwen3VLForConditionalGeneration)
    config = config_cls.from_dict({k: v for k, v in raw.items() if k not in ("architectures", "transformers_version")})
    generation = transformers.GenerationConfig.from_pretrained(out)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).eval()
    model.generation_config = generation
    for stale in out.glob("*.safetensors*"):
        stale.unlink()
    model.save_pretrained(out)
    if arch == "qwen3_vl_moe":
        _save_experts_as_released(out)
    return out


def _save_experts_as_released(folder: Path) -> None:
    """Rewrite the fused expert tensors in the released Qwen3-VL-MoE layout, which vLLM loads:
    ``gate_up_proj`` [E, hidden, 2I] and ``down_proj`` [E, I, hidden]. transformers 5.19 saves its
    in-memory layout ([E, 2I, hidden], [E, hidden, I]) and converts the released one when loading."""
    from safetensors.torch import load_file, save_file

    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(path)
        released = {name: (t.transpose(1, 2).contiguous() if name.endswith((".experts.gate_up_proj", ".experts.down_proj"))
                           else t) for name, t in tensors.items()}
        save_file(released, str(path), metadata={"format": "pt"})


def main(argv: list[str] | None = None) -> int:
    """``python -m vcast.vllm.tiny_checkpoints --out checkpoints/tiny_qwen3_vl_vllm [--arch qwen3_vl_moe]``."""
    parser = argparse.ArgumentParser(description="a tiny Qwen3-VL checkpoint vLLM's CPU attention accepts")
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    parser.add_argument("--arch", default="qwen3_vl", choices=("qwen3_vl", "qwen3_vl_moe"))
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    parser.add_argument("--head-dim", type=int, default=VLLM_CPU_HEAD_DIM, help="text head_dim (default 32)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    print(build_vllm_checkpoint(args.arch, args.out, args.seed, head_dim=args.head_dim, overwrite=args.overwrite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
