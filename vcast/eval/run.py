"""One lmms-eval run of a vcast plugin: ``python -m vcast.eval.run`` (or under
``accelerate launch --num_processes N -m vcast.eval.run`` for data parallelism).

It does what ``lmms-eval --model ... --log_samples`` does (same ``simple_evaluate``, same
output files) with two differences that matter for reproduction:

* the task prompts are chosen for the *stock* model the plugin stands in for
  (``--prompt_key qwen3_vl``): lmms-eval picks a task's ``lmms_eval_specific_kwargs`` block by the
  ``--model`` name, so ``--model vcast_qwen3_vl`` would silently get the default prompt instead
  of Video-MME's Qwen3-VL prompt;
* the model is built before the evaluation starts, so ``run_summary.json`` can record the wall
  time of the evaluation alone (the paper's total latency), without model loading.

``--use_cache DIR`` is lmms-eval's response cache, made a resume journal (:mod:`vcast.eval.resume`):
rank 0 first sets a cache of another fingerprint aside, merges the earlier attempts' answers and
records the attempt; a rerun then computes only the items not yet answered. ``--cache_identity``
(a sweep's cell digest) goes into the cache's model fingerprint.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Optional, Sequence

logger = logging.getLogger("vcast.eval.run")

TASKS_DIR = Path(__file__).parent / "tasks"
UNSTABLE_REPR = re.compile(r" at 0x[0-9a-fA-F]+>")  # Python's default object print
SUMMARY_FILE = "run_summary.json"


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m vcast.eval.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="lmms-eval model id: a model family's plugin (docs/models.md)")
    parser.add_argument("--model_args", default="", help="k=v,k2=v2 (lmms-eval syntax)")
    parser.add_argument("--tasks", required=True, help="comma-separated lmms-eval task names")
    parser.add_argument("--output_path", required=True, help="folder for results.json + samples")
    parser.add_argument("--prompt_key", default=None,
                        help="lmms_eval_specific_kwargs block to use (default: the model id)")
    parser.add_argument("--include_path", action="append", default=[],
                        help="extra task folder (vcast's own tasks are always included)")
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--limit", type=float, default=None, help="first N docs per task (or a fraction)")
    parser.add_argument("--seed", type=int, default=0, help="python/numpy/torch seeds of lmms-eval")
    parser.add_argument("--verbosity", default="WARNING")
    parser.add_argument("--use_cache", default=None,
                        help="response cache folder: answers are kept as they come and a rerun reuses them")
    parser.add_argument("--cache_identity", default=None,
                        help="what the cache's model fingerprint names besides the model arguments (a sweep's cell)")
    return parser.parse_args(argv)


def begin_attempt(lm: Any, model_args: str, cache: Path, identity: Optional[str]) -> int:
    """Make ``lm``'s fingerprint name ``identity``, then (rank 0 alone, the other ranks waiting)
    prepare the response cache at ``cache`` for a new attempt; the attempt's number, which ``lm``'s
    records carry."""
    from accelerate import PartialState

    from vcast.eval.resume import model_fingerprint, read_attempts, start_attempt

    if hasattr(lm, "cache_identity"):
        lm.cache_identity = identity
    fingerprint: Optional[str] = model_fingerprint(lm, model_args)
    if UNSTABLE_REPR.search(repr(lm)):
        # lmms-eval keys answers with this print, so no later run can find them: say so, and do not
        # set the cache aside each time for it
        logger.warning("%s prints with its memory address (%r): lmms-eval's response cache will not find this "
                       "run's answers in a later one; vcast's plugins print stably", type(lm).__name__, repr(lm))
        fingerprint = None
    state = PartialState()
    if state.is_main_process:
        start_attempt(cache, fingerprint, state.num_processes)
    state.wait_for_everyone()
    number = int(read_attempts(cache)[-1]["attempt"])
    if hasattr(lm, "attempt"):
        lm.attempt = number
    return number


def task_manager_for(tasks: Sequence[str], include: Sequence[str], verbosity: str, model_name: str) -> Any:
    """lmms-eval's ``TaskManager`` for ``tasks``: over the ``include`` folders alone when they hold
    every one of them, else with lmms-eval's own tasks too. Indexing lmms-eval's own (some 3,000
    YAML files) takes seconds per cell, which the synthetic benchmark's cells need not pay; a
    task is configured the same way whichever index found it."""
    from lmms_eval.tasks import TaskManager

    own = TaskManager(verbosity, include_path=list(include), include_defaults=False, model_name=model_name)
    if all(name in own.all_tasks for name in tasks):
        return own
    return TaskManager(verbosity, include_path=list(include), model_name=model_name)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from lmms_eval.evaluator import simple_evaluate
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.models import get_model

    output = Path(args.output_path)
    include = [str(TASKS_DIR), *args.include_path]
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    task_manager = task_manager_for(tasks, include, args.verbosity, args.prompt_key or args.model)
    unknown = [name for name in tasks if name not in task_manager.all_tasks]
    if unknown:
        raise SystemExit(f"unknown task(s) {', '.join(unknown)} (looked in lmms-eval and {', '.join(include)})")

    cache = None if args.use_cache is None else Path(args.use_cache).absolute()
    if cache is not None:
        from vcast.eval.resume import CHECKPOINT_INTERVAL_ENV

        os.environ.setdefault(CHECKPOINT_INTERVAL_ENV, "1")
    lm = get_model(args.model).create_from_arg_string(args.model_args, {"batch_size": args.batch_size})
    attempt = None if cache is None else begin_attempt(lm, args.model_args, cache, args.cache_identity)
    tracker = EvaluationTracker(output_path=str(output))
    datetime_str = time.strftime("%Y%m%d_%H%M%S")
    start = time.perf_counter()
    results = simple_evaluate(
        model=lm, model_args=args.model_args, tasks=tasks, task_manager=task_manager,
        batch_size=args.batch_size, limit=args.limit, log_samples=True, evaluation_tracker=tracker,
        bootstrap_iters=0, verbosity=args.verbosity, datetime_str=datetime_str, random_seed=args.seed,
        numpy_random_seed=args.seed, torch_random_seed=args.seed, fewshot_random_seed=args.seed,
        use_cache=None if cache is None else str(cache),
    )
    wall = time.perf_counter() - start
    if results is None:  # ranks > 0: rank 0 writes everything
        return 0
    samples = results.pop("samples")
    if attempt is not None:
        _count_every_attempt(results, args.model_args)
    tracker.save_results_aggregated(results=results, samples=samples, datetime_str=datetime_str)
    for task_name in results["configs"]:
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    summary = {"wall_s": wall, "world_size": int(os.environ.get("WORLD_SIZE", 1)), "datetime": datetime_str,
               "model": args.model, "model_args": args.model_args, "tasks": tasks, "limit": args.limit,
               "attempt": attempt}
    (output / SUMMARY_FILE).write_text(json.dumps(summary, indent=2))
    logger.info("evaluation took %.1f s; results in %s", wall, output)
    return 0


def _count_every_attempt(results: dict[str, Any], model_args: str) -> None:
    """Put the totals over every attempt of a resumed run in lmms-eval's ``results["throughput"]``
    (each item once, from the attempt that computed it; ``attempts`` says how many), where the
    plugin logged its own attempt's calls only: a resumed cell's results say what an uninterrupted
    run's say, timings aside. Nothing changes without an ``efficiency_dir``."""
    from lmms_eval.utils import simple_parse_args_string

    from vcast.eval.efficiency import attempts_throughput
    from vcast.results.tree import read_efficiency

    directory = simple_parse_args_string(model_args).get("efficiency_dir")
    if not directory:
        return
    block = attempts_throughput(read_efficiency(Path(str(directory))))
    if block is not None:
        results["throughput"] = block


if __name__ == "__main__":
    from vcast.frozen_heap import freeze_heap

    status = main()
    freeze_heap()  # a quick exit: Python's shutdown no longer walks what torch and lmms-eval made
    raise SystemExit(status)
