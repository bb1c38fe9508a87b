"""The demo model's training recipe: every number that decides the weights, in one place.

The model is :func:`vcast.tiny_checkpoints.build` ``("qwen3_vl", "demo", seed)`` with the prompts'
words as tokens (:mod:`vcast.demo_model.vocabulary`): the real ``Qwen3VLForConditionalGeneration``
at 1.2 M parameters. It is trained from those random weights on clips the benchmark's own
generator draws from seeds no evaluation set uses, to reply with the answer's option text
(``" blue"``, ``" 3"``), plus an auxiliary loss (``aux_weight``) from a linear head on the last
hidden state of every video token that predicts how many times the object has come on so far;
the head is discarded, the checkpoint is the plain model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vcast.eval.synthetic_benchmark import HELDOUT_SEED

# The first generator seed of the training clips (seed, seed + 1, ... each with ITEMS_PER_SEED per
# category) and the validation set's seed: far from the seeds of the default set (0) and of the
# held-out set (HELDOUT_SEED).
TRAIN_SEED0 = 10_000
VALIDATION_SEED = 9_000
ITEMS_PER_SEED = 4


@dataclass(frozen=True)
class Recipe:
    """Hyper-parameters of :func:`vcast.demo_model.train.train`."""

    seed: int = 0                 # weights (tiny_checkpoints.build) and the shuffling of the clips
    frames: int = 32              # frames per clip, read as the harness reads them at frames=32
    steps: int = 2000             # training steps ...
    batch: int = 8                # ... of this many clips
    lr: float = 2e-3              # AdamW learning rate (after a linear warm-up over warmup_steps)
    warmup_steps: int = 50
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    grad_clip: float = 1.0
    aux_weight: float = 0.1       # the running-count head's loss weight (0 turns it off)
    threads: int = 1              # torch threads of the training steps (CPU results depend on it in the last bits)
    loader_processes: int = 1     # processes drawing and encoding the clips meanwhile (0: in the training process)
    bf16: bool = True             # bf16 autocast for the steps (CPUs with AVX512-BF16 / AMX run it ~1.5x faster)
    validation_items: int = 20    # per category, from VALIDATION_SEED, scored every validate_every steps
    validate_every: int = 200

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "bf16":
                if not isinstance(value, bool):
                    raise ValueError(f"Recipe.bf16 must be a bool, got {value!r}")
                continue
            if field.name == "betas":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Recipe.{field.name} must be a non-negative number, got {value!r}")
        for name in ("frames", "batch", "threads", "validate_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"Recipe.{name} must be >= 1, got {getattr(self, name)!r}")
        if self.frames % 2:
            raise ValueError(f"Recipe.frames must be even (Qwen3-VL's temporal patch is 2), got {self.frames}")

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "betas": list(self.betas)}


def training_seeds(recipe: Recipe) -> range:
    """The generator seeds training draws its clips from (enough for ``recipe.steps`` batches)."""
    per_seed = 3 * ITEMS_PER_SEED
    return range(TRAIN_SEED0, TRAIN_SEED0 + -(-recipe.steps * recipe.batch // per_seed))


def check_disjoint_from_evaluation(seeds: range) -> None:
    """Refuse a training seed range that holds an evaluation set's seed (0, HELDOUT_SEED)."""
    for evaluation in (0, HELDOUT_SEED, VALIDATION_SEED):
        if evaluation in seeds:
            raise ValueError(f"training seeds {seeds.start}..{seeds.stop - 1} include the evaluation seed {evaluation}")
