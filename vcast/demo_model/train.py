"""Train the demo model on CPU and write it as a checkpoint folder (``make demo-model``).

    python -m vcast.demo_model.train                              # checkpoints/demo_qwen3_vl, the recipe
    python -m vcast.demo_model.train --out /tmp/demo --set steps=10   # a quick try

The folder holds the model and processor (``from_pretrained`` loads it offline), ``training.json``
(the recipe, the seeds, versions, wall time, the validation scores), ``loss_curve.csv`` and
``SHA256SUMS``. It is written beside ``--out`` and renamed into place, so a failed or interrupted
run leaves the old folder as it was. See :mod:`vcast.demo_model.recipe` for what is trained how.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import itertools
import json
import logging
import platform
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from tqdm import tqdm

from vcast.atomic_files import folder_in_place
from vcast.demo_model.checksums import write_checksums
from vcast.demo_model.examples import (
    MAX_FLASHES,
    encode,
    generation_inputs,
    reply_text,
    task_hooks,
)
from vcast.demo_model.recipe import (
    ITEMS_PER_SEED,
    TRAIN_SEED0,
    VALIDATION_SEED,
    Recipe,
    check_disjoint_from_evaluation,
    training_seeds,
)
from vcast.demo_model.vocabulary import prompt_words
from vcast.eval.synthetic_benchmark import Item, iter_items

logger = logging.getLogger(__name__)

DEFAULT_OUT = Path("checkpoints/demo_qwen3_vl")
CURVE_FIELDS = ("step", "items", "loss", "aux_loss", "lr", "elapsed_s", "val_appear", "val_cut", "val_count", "val_all")


def item_stream(seed0: int, shuffle_seed: int) -> Iterator[Item]:
    """Items of seeds ``seed0, seed0 + 1, ...`` (all three categories of a seed, shuffled together)."""
    order = random.Random(shuffle_seed)
    for seed in itertools.count(seed0):
        chunk = list(iter_items(seed=seed, items_per_category=ITEMS_PER_SEED))
        order.shuffle(chunk)
        yield from chunk


class VideoBatches(torch.utils.data.IterableDataset):
    """The training batches, in order: ``steps`` batches of ``recipe.batch`` clips from
    :data:`TRAIN_SEED0` on, encoded (:func:`vcast.demo_model.examples.encode`). Drawing and
    encoding the clips costs about half as much as the training step, so a loader process makes
    them while the model trains (one process: the order is the same as without it)."""

    def __init__(self, processor: Any, recipe: Recipe) -> None:
        super().__init__()
        self.processor, self.recipe = processor, recipe

    def __iter__(self) -> Iterator[dict[str, Any]]:
        clips = item_stream(TRAIN_SEED0, self.recipe.seed)
        for _ in range(self.recipe.steps):
            items = [next(clips) for _ in range(self.recipe.batch)]
            yield dict(encode(self.processor, items, [reply_text(item) for item in items], self.recipe.frames))


class RunningCountHead(torch.nn.Module):
    """Training-only linear probe: the video tokens' last hidden state -> onsets so far (0..4)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(hidden, MAX_FLASHES + 1)

    def loss(self, hidden: torch.Tensor, video_mask: torch.Tensor, targets: Sequence[torch.Tensor]) -> torch.Tensor:
        """``hidden`` ``[B, S, D]``, ``video_mask`` ``[B, S]``, ``targets[b]`` ``[T_b / 2]`` -> mean CE."""
        rows, labels = [], []
        for b, per_patch in enumerate(targets):
            tokens = hidden[b][video_mask[b]]  # [T_b / 2 * P, D], patch-major
            rows.append(tokens)
            labels.append(per_patch.repeat_interleave(tokens.shape[0] // per_patch.shape[0]))
        return torch.nn.functional.cross_entropy(self.proj(torch.cat(rows)), torch.cat(labels))


def validate(model: Any, processor: Any, items: Sequence[Item], frames: int, batch: int = 8) -> dict[str, float]:
    """Greedy replies to ``items``, scored by the task's parser: accuracy (%) per category and ``all``."""
    parse_choice = task_hooks().parse_choice
    correct: dict[str, list[bool]] = {}
    model.eval()
    with torch.no_grad():
        for start in range(0, len(items), batch):
            chunk = items[start:start + batch]
            inputs = generation_inputs(processor, chunk, frames)
            out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
            replies = processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
            for item, reply in zip(chunk, replies):
                correct.setdefault(item.category, []).append(parse_choice(reply, item.options) == item.answer)
    model.train()
    scores = {category: 100.0 * sum(hits) / len(hits) for category, hits in correct.items()}
    scores["all"] = 100.0 * sum(sum(hits) for hits in correct.values()) / len(items)
    return scores


def _autocast(recipe: Recipe) -> Any:
    """bf16 matmuls for the training steps (weights and optimizer stay float32), when the recipe says."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=recipe.bf16)


def _set_lr(optimizer: torch.optim.Optimizer, recipe: Recipe, step: int) -> float:
    lr = recipe.lr * min(1.0, (step + 1) / max(recipe.warmup_steps, 1))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def _step(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], loss: torch.Tensor,
          recipe: Recipe) -> None:
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, recipe.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def train(recipe: Recipe = Recipe(), out_dir: str | Path = DEFAULT_OUT, *, overwrite: bool = False) -> Path:
    """Train the demo model with ``recipe`` and write its checkpoint folder to ``out_dir``.

    An existing non-empty ``out_dir`` raises ``FileExistsError`` unless ``overwrite``; the folder
    is built beside it and swapped in at the end, so nothing is lost or half-written on failure.
    """
    from vcast.tiny_checkpoints import build

    out = Path(out_dir).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True / --overwrite to replace it)")
    seeds = training_seeds(recipe)
    check_disjoint_from_evaluation(seeds)
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    model, processor = build("qwen3_vl", "demo", recipe.seed, words=prompt_words())
    model.train()
    head = RunningCountHead(model.config.text_config.hidden_size)
    params = [*model.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=recipe.lr, betas=recipe.betas, weight_decay=recipe.weight_decay)
    video_token = model.config.video_token_id
    validation = list(iter_items(seed=VALIDATION_SEED, items_per_category=recipe.validation_items))
    curve: list[dict[str, Any]] = []
    start = time.perf_counter()
    logger.info("demo model: %.2f M parameters, %d steps of %d clips, %d thread(s) + %d loader process(es)",
                sum(p.numel() for p in model.parameters()) / 1e6, recipe.steps, recipe.batch, recipe.threads,
                recipe.loader_processes)

    # The clips: the reply (the answer's option text) and the running-count probe.
    loader = torch.utils.data.DataLoader(VideoBatches(processor, recipe), batch_size=None,
                                         num_workers=recipe.loader_processes,
                                         prefetch_factor=4 if recipe.loader_processes else None)
    progress = tqdm(enumerate(loader), total=recipe.steps, desc="demo model", unit="step", file=sys.stderr)
    for step, batch in progress:
        onsets = batch.pop("running_onsets")
        lr = _set_lr(optimizer, recipe, step)
        with _autocast(recipe):
            output = model(**batch, output_hidden_states=recipe.aux_weight > 0)
            loss, aux = output.loss, None
            if recipe.aux_weight > 0:
                aux = head.loss(output.hidden_states[-1], batch["input_ids"] == video_token, onsets)
                loss = loss + recipe.aux_weight * aux
        _step(optimizer, params, loss, recipe)
        row = _row(step, (step + 1) * recipe.batch, output.loss.item(), aux, lr, start)
        if (step + 1) % 25 == 0:
            logger.debug("step %d: loss %.3f, running-count loss %s", step + 1, row["loss"], row["aux_loss"])
        if (step + 1) % recipe.validate_every == 0 or step + 1 == recipe.steps:
            scores = validate(model, processor, validation, recipe.frames)
            row.update({f"val_{key}": round(value, 2) for key, value in scores.items()})
            logger.info("step %d: loss %.3f, validation %s", step + 1, row["loss"],
                        ", ".join(f"{k} {v:.1f}%" for k, v in scores.items()))
        curve.append(row)
        progress.set_postfix(loss=f"{row['loss']:.3f}")
    elapsed = time.perf_counter() - start
    final = {key[4:]: curve[-1][key] for key in CURVE_FIELDS if key.startswith("val_") and key in curve[-1]}
    logger.info("trained in %.0f s; validation %s", elapsed, final)
    return _write(model, processor, out, recipe, curve, elapsed, final, seeds)


def _row(step: int, items: int, loss: float, aux: Optional[torch.Tensor], lr: float, start: float) -> dict[str, Any]:
    return {"step": step + 1, "items": items, "loss": round(loss, 5),
            "aux_loss": None if aux is None else round(aux.item(), 5), "lr": lr,
            "elapsed_s": round(time.perf_counter() - start, 1)}


def _write(model: Any, processor: Any, out: Path, recipe: Recipe, curve: list[dict[str, Any]], elapsed: float,
           validation: dict[str, float], seeds: range) -> Path:
    import transformers

    with folder_in_place(out) as tmp:
        model.eval()
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        lines = io.StringIO()
        writer = csv.DictWriter(lines, fieldnames=CURVE_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(curve)
        (tmp / "loss_curve.csv").write_text(lines.getvalue())
        info = {
            "model": "Qwen3VLForConditionalGeneration (vcast.tiny_checkpoints size 'demo'), trained from random weights",
            "parameters": sum(p.numel() for p in model.parameters()),
            "recipe": recipe.as_dict(),
            "training_data": {"generator": "vcast.eval.synthetic_benchmark.iter_items", "items_per_category": ITEMS_PER_SEED,
                              "seeds": [seeds.start, seeds.stop - 1],
                              "validation_seed": VALIDATION_SEED},
            "validation": validation,
            "train_seconds": round(elapsed, 1),
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__},
            "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads",
            "command": "make demo-model (python -m vcast.demo_model.train)",
        }
        (tmp / "training.json").write_text(json.dumps(info, indent=2) + "\n")
        for path in tmp.iterdir():
            path.chmod(0o644)  # safetensors writes 0600; the checkpoint is meant to be shared
        write_checksums(tmp)
    logger.info("wrote %s", out)
    return out


def _parse_sets(values: Sequence[str]) -> dict[str, Any]:
    """``["steps=10", "lr=1e-3"]`` -> typed Recipe overrides; names the bad key or value."""
    fields = {field.name: field for field in dataclasses.fields(Recipe)}
    overrides: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or key not in fields or key == "betas":
            raise ValueError(f"--set {value!r}: expected KEY=VALUE with KEY one of "
                             f"{', '.join(k for k in fields if k != 'betas')}")
        kind = type(getattr(Recipe(), key))
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0"):
                raise ValueError(f"--set {value!r}: {key} takes true or false")
            overrides[key] = raw.lower() in ("true", "1")
            continue
        try:
            overrides[key] = kind(raw)
        except ValueError:
            raise ValueError(f"--set {value!r}: {key} takes a {kind.__name__}") from None
    return overrides


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"checkpoint folder (default {DEFAULT_OUT})")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="recipe overrides (vcast.demo_model.recipe.Recipe), e.g. steps=10")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        recipe = Recipe(**_parse_sets(args.set))
        out = train(recipe, args.out, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as err:
        parser.error(str(err))
    print(f"demo model: {out} ({json.loads((out / 'training.json').read_text())['validation']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
