"""The shared half of vcast's lmms-eval model plugins: arguments, loading, attaching the pruning
method, the request loop, efficiency records.

A subclass knows one family's prompt and video handling (:meth:`VCastLMM._prepare`), follows
lmms-eval's own wrapper for it, and names its family (``family``: :class:`vcast.families.Family`). ``method="vanilla"`` attaches the keep-everything method,
so the unpruned model runs through the same hooks and meters as every other method. An input
method (``fewer_frames``, ``downsample``; :mod:`vcast.input_methods`) changes what ``_prepare`` gives
the processor and runs the model with the keep-everything method.
"""

from __future__ import annotations

import copy
import logging
import time
from collections import defaultdict, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from lmms_eval import utils as lmms_utils
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from tqdm import tqdm

from vcast.eval.call_recorder import CallRecorder
from vcast.eval.efficiency import EfficiencyLog, throughput_payload
from vcast.eval.missing_visuals import POLICIES as MISSING_POLICIES
from vcast.eval.missing_visuals import MissingVisualsLog
from vcast.eval.plugin_args import ATTN_IMPLEMENTATIONS, DTYPE_NAMES
from vcast.eval.prefetch import Prefetcher
from vcast.eval.prepared_inputs import PreparedInputs
from vcast.eval.resume import Progress, calling_response_cache, store_answers
from vcast.eval.video import UNREADABLE_VIDEO
from vcast.families import Family
from vcast.kept_records import Geometry, rank_file

logger = logging.getLogger(__name__)

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}


def _device_and_map(device: Optional[str], device_map: Optional[str], local_rank: int,
                    processes: int) -> tuple[torch.device, Optional[str]]:
    """Where the model goes: one device per process when data-parallel, as lmms-eval does."""
    if processes > 1:
        local = f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"
        return torch.device(local), None
    if device_map == "auto":
        if not torch.cuda.is_available():
            raise ValueError("device_map='auto' needs CUDA devices; none is available")
        return torch.device("cuda"), "auto"
    chosen = device_map or device or ("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(chosen), None


@dataclass(frozen=True)
class Placement:
    """Where one plugin process runs: its accelerator, device (and ``device_map``), dtype name and rank."""

    accelerator: Any
    device: torch.device
    device_map: Optional[str]
    dtype: str
    rank: int
    world_size: int

    @classmethod
    def choose(cls, device: Optional[str], device_map: Optional[str], dtype: str) -> "Placement":
        """From the plugin's ``device``, ``device_map`` and ``dtype`` arguments (``auto``: bfloat16 on
        GPU, float32 on CPU); ValueError naming a bad dtype."""
        from accelerate import Accelerator

        accelerator = Accelerator()
        processes = accelerator.num_processes
        chosen, load_map = _device_and_map(device, device_map, accelerator.local_process_index, processes)
        if dtype == "auto":
            dtype = "bfloat16" if chosen.type == "cuda" else "float32"
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be 'auto' or one of {', '.join(DTYPES)}, got {dtype!r}")
        return cls(accelerator, chosen, load_map, dtype, accelerator.process_index, processes)


def check_plugin_args(method: str, attn_implementation: Optional[str], max_num_frames: int, batch_size: int | str,
                      missing_visuals: str, prefetch: int) -> None:
    """ValueError naming the first bad model argument, before anything is loaded."""
    from vcast.registry import get_method
    from vcast.validation import check_choice, check_int

    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {ATTN_IMPLEMENTATIONS}, got {attn_implementation!r}")
    check_int("max_num_frames", max_num_frames, 1)
    if str(batch_size) == "auto" or int(batch_size) < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    get_method(method)  # an unknown name fails here, before the model is loaded
    check_choice("missing_visuals", missing_visuals, MISSING_POLICIES)
    check_int("prefetch", prefetch, 0)


def stop_strings(gen_kwargs: dict[str, Any], end_of_text: str) -> list[str]:
    """The task's ``until`` strings, popped from ``gen_kwargs`` (default: ``end_of_text``), without
    ``"\n\n"`` as lmms-eval's Qwen3-VL wrapper drops it; ValueError naming a malformed value."""
    until = gen_kwargs.pop("until", None) or [end_of_text]
    if isinstance(until, str):
        until = [until]
    if not isinstance(until, list):
        raise ValueError(f"gen_kwargs['until'] must be a string or a list, got {type(until).__name__}")
    return [stop for stop in until if stop != "\n\n"]


def cut_at_stops(text: str, stops: list[str]) -> str:
    """``text`` up to the first occurrence of each non-empty stop string, applied in order."""
    for stop in stops:
        if stop:
            text = text.split(stop)[0]
    return text


def record_answers(model: lmms, texts: Sequence[str], requests: Sequence[Instance], gen_kwargs: dict[str, Any],
                   until: list[str], answers: list[str], cache: Any = None) -> None:
    """A batch's answers, each cut at the task's ``until`` strings, appended to ``answers`` in order
    and written at once into lmms-eval's response cache ``cache`` (the one evaluating, see
    :mod:`vcast.eval.resume`; None without ``use_cache``) and its cache hook (every vcast plugin's
    request loop ends its batch so)."""
    cut = [cut_at_stops(text, until) for text in texts]
    answers.extend(cut)
    for text, request in zip(cut, requests):
        model.cache_hook.add_partial("generate_until", (request.args[0], gen_kwargs), text)
    store_answers(cache, requests, cut)


class RequestsByArgs:
    """The lmms-eval Instance behind each ``request.args`` tuple a ``Collator`` hands back (the
    same tuple objects, in its own order); a request repeated ``k`` times comes back ``k`` times."""

    def __init__(self, requests: Sequence[Instance]) -> None:
        self._by_id: dict[int, deque[Instance]] = defaultdict(deque)
        for request in requests:
            self._by_id[id(request.args)].append(request)

    def take(self, chunk: Sequence[tuple]) -> list[Instance]:
        return [self._by_id[id(args)].popleft() for args in chunk]


def plugin_repr(model: Any) -> str:
    """How a vcast plugin prints: its class and, in a sweep, its cell's identity digest. lmms-eval's
    response cache fingerprints the model as ``f"{model}|{model_args}"``, so this must be the same
    in every attempt of a cell (not the default ``<... object at 0x...>``) and name the cell."""
    identity = getattr(model, "cache_identity", None)
    return type(model).__name__ + (f"[{identity}]" if identity else "")


@dataclass
class PreparedBatch:
    """One batch made ready for the model (by :meth:`VCastLMM._prepare_batch`, maybe in the
    prefetch worker): ``readable`` indices of the requests whose visuals read, their processor
    ``inputs`` (None when none read), and ``missing`` ``(task, doc_id, error)`` of the others, for
    the request loop to record when it reaches the batch (so the record order and the log stay the
    serial run's, whatever was prepared ahead)."""

    readable: list[int]
    inputs: Optional[PreparedInputs]
    missing: list[tuple[str, Any, Exception]] = field(default_factory=list)


class VCastLMM(lmms):
    """Base of every family's plugin (simple, ``generate_until`` only; the ids are the families'
    ``plugin_id``: ``vcast_qwen3_vl``, ``vcast_llava_ov``, ...).

    model_args (all ``key=value``): ``pretrained`` (hub id or folder), ``method`` (``vanilla``
    or a name from :func:`vcast.available_methods`), ``ratio`` (default 1.0 for vanilla, 0.25
    otherwise), the method's parameters (e.g. ``tau=0.7``), ``max_num_frames``,
    ``attn_implementation`` (``sdpa`` default, ``eager``, ``flash_attention_2``), ``batch_size``,
    ``device_map`` (``auto`` shards one model over the node's GPUs), ``device``, ``dtype``
    (``auto``: bfloat16 on GPU, float32 on CPU), ``positions`` and ``compress_images`` (see
    :func:`vcast.models.attach`), ``efficiency_dir`` (per-call records, one JSONL per rank),
    ``missing_visuals`` (``skip``, default: an item whose video is missing or undecodable is
    answered empty and recorded, see :mod:`vcast.eval.missing_visuals`; ``fail``: it fails the run),
    ``warmup`` (default true: generate two tokens for the first batch once, untimed, so one-time
    costs such as kernel selection are not charged to the first item), ``prefetch`` (default 2:
    batches whose videos are read and preprocessed ahead, in a background thread, while the model
    runs the current one, see :mod:`vcast.eval.prefetch`; 0: each batch is read when its turn
    comes, serially with the model; same answers and records either way), ``record_kept``
    (default true: with ``efficiency_dir`` set, which video tokens each item kept, one
    :class:`vcast.kept_records.KeptRecord` per video, in ``<efficiency_dir>/../kept/rank<r>.jsonl``;
    it changes nothing the model computes, so a sweep's cell is the same cell either way).
    """

    family: Family  # set by each family's plugin class
    is_simple = True
    DEFAULT_MAX_NEW_TOKENS = 128

    def __init__(
        self,
        pretrained: str,
        method: str = "vanilla",
        ratio: Optional[float] = None,
        max_num_frames: int = 32,
        attn_implementation: Optional[str] = "sdpa",
        batch_size: int | str = 1,
        device_map: Optional[str] = None,
        device: Optional[str] = None,
        dtype: str = "auto",
        positions: Optional[str] = None,
        compress_images: bool = False,
        efficiency_dir: Optional[str] = None,
        missing_visuals: str = "skip",
        warmup: bool = True,
        prefetch: int = 2,
        record_kept: bool = True,
        use_cache: bool = True,
        max_batch_size: Optional[int] = None,  # passed by lmms-eval's CLI; unused
        **method_params: Any,
    ) -> None:
        super().__init__()
        from vcast.api import input_plan
        from vcast.models import attach
        from vcast.registry import is_input_method

        check_plugin_args(method, attn_implementation, max_num_frames, batch_size, missing_visuals, prefetch)
        ratio = (1.0 if method == "vanilla" else 0.25) if ratio is None else float(ratio)
        # An input method prunes nothing: the model runs unpruned on the smaller input.
        self.input_plan = input_plan(method, ratio, **method_params) if is_input_method(method) else None
        if self.input_plan is not None:
            self._check_input_plan(self.input_plan)
        place = Placement.choose(device, device_map, dtype)
        self.accelerator, self._device = place.accelerator, place.device
        self._rank, self._world_size = place.rank, place.world_size
        self.pretrained, self.method, self.ratio = pretrained, method, ratio
        self.max_num_frames = max_num_frames
        self.batch_size_per_gpu = int(batch_size)
        self.use_cache = use_cache
        self._needs_warmup = bool(warmup)
        self.prefetch = prefetch
        # The request loop decodes with its own copy: the prefetch worker's processor calls set the
        # fast tokenizer's padding (a mutable borrow in Rust), which fails ("Already borrowed") while
        # another thread is inside a decode of the same tokenizer.
        self._decoder = copy.deepcopy(self.processor.tokenizer)

        self._model = self._load_model(pretrained, DTYPES[place.dtype], attn_implementation, place.device_map)
        attached = (method, self.ratio, method_params) if self.input_plan is None else ("vanilla", 1.0, {})
        self.handle = attach(self._model, attached[0], attached[1], positions=positions,
                             compress_images=compress_images, **attached[2])
        self._open_records(efficiency_dir, record_kept, missing_visuals)
        # Set by vcast.eval.run for a resumable run: the attempt number its records carry, and the
        # cell identity the response cache's fingerprint names (see plugin_repr).
        self.attempt: Optional[int] = None
        self.cache_identity: Optional[str] = None
        logger.info("%s: %s on %s (%s, %s attention), method=%s ratio=%s params=%s, rank %d/%d",
                    type(self).__name__, pretrained, self._device, place.dtype, attn_implementation or "default",
                    method, self.ratio, method_params, self._rank, self._world_size)

    def _open_records(self, efficiency_dir: Optional[str], record_kept: bool, missing_visuals: str) -> None:
        """The per-rank efficiency, kept-token and missing-visual logs (none without ``efficiency_dir``)."""
        self.efficiency = EfficiencyLog(efficiency_dir, self._rank)
        # Beside the efficiency folder: in a sweep both sit in the cell's folder.
        kept_path = (rank_file(Path(efficiency_dir).parent, self._rank)
                     if record_kept and efficiency_dir is not None else None)
        self.recorder = CallRecorder(self.efficiency, kept_path, self.method, self._video_geometries)
        self.missing_policy = missing_visuals
        self.missing = MissingVisualsLog(efficiency_dir, self._rank)
        self.efficiency_dir = None if efficiency_dir is None else Path(efficiency_dir)

    def __repr__(self) -> str:
        return plugin_repr(self)

    # lmms-eval's model interface ----------------------------------------------------------------
    @property
    def model(self) -> torch.nn.Module:
        return self._model

    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    @property
    def eot_token_id(self) -> int:
        return self._decoder.eos_token_id

    @property
    def batch_size(self) -> int:
        return self.batch_size_per_gpu

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world_size

    def clean(self) -> None:
        """lmms-eval calls this after ``evaluate``: remove the hooks, then free the model."""
        self.handle.detach()
        super().clean()

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError(f"{type(self).__name__} implements generate_until only")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} implements generate_until only")

    def _load_model(self, pretrained: str, dtype: torch.dtype, attn_implementation: Optional[str],
                    load_map: Optional[Any]) -> torch.nn.Module:
        """The family's class of ``pretrained``, on this rank's device (or sharded by ``load_map``), in eval mode."""
        load_kwargs: dict[str, Any] = {"dtype": dtype}
        if attn_implementation is not None:
            load_kwargs["attn_implementation"] = attn_implementation
        if load_map is not None:
            load_kwargs["device_map"] = load_map
        model = self._model_class(pretrained).from_pretrained(pretrained, **load_kwargs)
        if load_map is None:
            model.to(self._device)
        return model.eval()

    # Subclass hooks -----------------------------------------------------------------------------
    def _check_input_plan(self, plan: Any) -> None:
        """ValueError when this architecture cannot take input method ``plan`` (before loading)."""

    def _model_class(self, pretrained: str) -> type:
        """The transformers class of ``pretrained``'s ``model_type`` in this plugin's family;
        ValueError naming a checkpoint of another model type."""
        import transformers

        config = transformers.AutoConfig.from_pretrained(pretrained)
        family = self.family
        if config.model_type not in family.model_types:
            raise ValueError(f"{family.plugin_id}: {pretrained} is a {config.model_type!r} checkpoint; expected one of "
                             f"{', '.join(family.model_types)} ({family.display})")
        return getattr(transformers, family.hf_class(config.model_type))

    def _prepare(self, contexts: list[str], visuals: list[list[Any]]) -> PreparedInputs:
        """One batch of prompts and their visuals made ready for the model: the processor's
        outputs (a BatchFeature on CPU), each video's source frame indices and, under an input
        method, its budget."""
        raise NotImplementedError

    def _video_geometries(self, inputs: Any, videos: list[Any]) -> list[Geometry]:
        """The token grid of each video the last call saw (``videos``: its video segments, in
        batch order) on the frames the processor gave the model (``inputs``)."""
        raise NotImplementedError

    # The request loop ---------------------------------------------------------------------------
    def generate_until(self, requests: list[Instance]) -> list[str]:
        """lmms-eval's order and batching (longest prompt first, grouped by gen_kwargs), greedy
        unless the task asks otherwise; answers cut at the task's ``until`` strings.

        Each batch's videos are read and preprocessed by :meth:`_prepare_batch`, up to
        ``prefetch`` batches ahead in a background thread (:class:`vcast.eval.prefetch.Prefetcher`:
        same order, an error raised at its own batch); its unreadable items are recorded here,
        when the loop reaches the batch, as in a serial run."""

        def by_length(args: tuple) -> tuple[int, str]:
            return -len(self.tokenizer.encode(args[0])), args[0]

        cache = calling_response_cache()
        behind = RequestsByArgs(requests)
        ordered = lmms_utils.Collator([request.args for request in requests], by_length, grouping=True)
        # All batches up front (the prompts' order and grouping; no video is read here): the sort
        # encodes every prompt in this thread before the worker starts, so while it runs only the
        # worker encodes (and sets the tokenizer's padding); this thread only decodes.
        chunks = list(ordered.get_batched(n=self.batch_size, batch_fn=None))
        answers: list[str] = []
        done = Progress(self.efficiency_dir, self.rank, self.attempt, len(requests))
        progress = tqdm(total=len(requests), disable=self.rank != 0, desc=f"{self.method} r={self.ratio:g}")
        with Prefetcher(chunks, self._prepare_batch, self.prefetch, name=f"vcast-prefetch-rank{self.rank}") as batches:
            for prepared in batches:
                chunk, batch = prepared.item, prepared.value
                _, all_gen_kwargs, _, doc_ids, tasks, _ = zip(*chunk)
                for task, doc_id, error in batch.missing:
                    self.missing.add(task, doc_id, error)
                gen_kwargs = dict(all_gen_kwargs[0])
                until = self._until(gen_kwargs)
                readable = batch.readable
                texts = [""] * len(chunk)  # an unreadable item's answer: empty, scored as the task scores it
                if readable:
                    inputs = batch.inputs.to(self._device)
                    if self._needs_warmup:
                        self._needs_warmup = False
                        with torch.inference_mode():
                            self._model.generate(**inputs.tensors,
                                                 **self._generate_kwargs({**gen_kwargs, "max_new_tokens": 2}))
                    generated = self._generate(inputs, gen_kwargs, [tasks[i] for i in readable],
                                               [doc_ids[i] for i in readable],
                                               prepare_s=prepared.prepare_s, wait_s=prepared.wait_s)
                    for index, text in zip(readable, generated):
                        texts[index] = text
                record_answers(self, texts, behind.take(chunk), gen_kwargs, until, answers, cache)
                done.add(len(chunk))
                progress.update(len(chunk))
        progress.close()
        self._log_totals()
        return ordered.get_original(answers)

    def _prepare_batch(self, chunk: list[tuple]) -> PreparedBatch:
        """Read and preprocess one batch of lmms-eval request args (the prefetch worker's job, or
        inline under ``prefetch=0``). Side-effect free: unreadable items come back in ``missing``
        for the request loop to record; under ``missing_visuals=fail`` the first one raises."""
        contexts, _, doc_to_visual, doc_ids, tasks, splits = zip(*chunk)
        missing: list[tuple[str, Any, Exception]] = []
        # Each request's own doc_to_visual: a task group (MVBench's 20 subtasks) batches requests
        # of several tasks, each reading its videos from its own folder.
        visuals = [self._visuals(to_visual, task, split, doc_id, missing)
                   for to_visual, task, split, doc_id in zip(doc_to_visual, tasks, splits, doc_ids)]
        readable, inputs = self._prepare_readable(list(contexts), visuals, tasks, doc_ids, missing)
        return PreparedBatch(readable, inputs, missing)

    def _visuals(self, to_visual: Any, task: str, split: str, doc_id: Any,
                 missing: list[tuple[str, Any, Exception]]) -> Optional[list[Any]]:
        """The request's visuals from its own task's doc; None (appended to ``missing``) when the
        task itself reports the file missing (``FileNotFoundError``) and ``missing_visuals=skip``."""
        try:
            return list(to_visual(self.task_dict[task][split][doc_id]) or [])
        except FileNotFoundError as error:
            if self.missing_policy == "fail":
                raise
            missing.append((task, doc_id, error))
            return None

    def _prepare_readable(self, contexts: list[str], visuals: list[Optional[list[Any]]], tasks: tuple,
                          doc_ids: tuple, missing: list[tuple[str, Any, Exception]]) -> tuple[list[int], Any]:
        """``(indices of the requests whose videos read, their processor inputs)``.

        The batch is prepared whole; only when a video cannot be read is each request tried alone,
        so the unreadable ones are appended to ``missing`` (or, under ``missing_visuals=fail``,
        raised)."""
        candidates = [i for i, items in enumerate(visuals) if items is not None]
        if not candidates:
            return [], None
        try:
            return candidates, self._prepare([contexts[i] for i in candidates], [visuals[i] for i in candidates])
        except UNREADABLE_VIDEO as error:
            if self.missing_policy == "fail":
                raise
            if len(candidates) == 1:
                missing.append((tasks[candidates[0]], doc_ids[candidates[0]], error))
                return [], None
        readable = []
        for index in candidates:
            try:
                self._prepare([contexts[index]], [visuals[index]])
            except UNREADABLE_VIDEO as error:
                missing.append((tasks[index], doc_ids[index], error))
                continue
            readable.append(index)
        if not readable:
            return [], None
        return readable, self._prepare([contexts[i] for i in readable], [visuals[i] for i in readable])

    def _until(self, gen_kwargs: dict[str, Any]) -> list[str]:
        return stop_strings(gen_kwargs, self._decoder.decode(self.eot_token_id))

    def _generate_kwargs(self, gen_kwargs: dict[str, Any]) -> dict[str, Any]:
        temperature = gen_kwargs.get("temperature") or 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": int(gen_kwargs.get("max_new_tokens", self.DEFAULT_MAX_NEW_TOKENS)),
            "do_sample": temperature > 0,
            "num_beams": int(gen_kwargs.get("num_beams") or 1),
            "use_cache": self.use_cache,
            "eos_token_id": self.eot_token_id,
            "pad_token_id": self._pad_token_id,
        }
        if temperature > 0:
            kwargs["temperature"] = temperature
            if gen_kwargs.get("top_p") is not None:
                kwargs["top_p"] = gen_kwargs["top_p"]
        else:  # greedy: say so explicitly, so a checkpoint's sampling defaults cannot leak in
            kwargs.update(temperature=None, top_p=None, top_k=None)
        return kwargs

    @property
    def _pad_token_id(self) -> int:
        pad = self._decoder.pad_token_id
        return self.eot_token_id if pad is None else pad

    def _synchronize(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)

    def _generate(self, inputs: PreparedInputs, gen_kwargs: dict[str, Any], tasks: list[str] | str, doc_ids: list[int],
                  prepare_s: Optional[float] = None, wait_s: Optional[float] = None) -> list[str]:
        """Generate for one prepared batch and record the call; ``prepare_s`` / ``wait_s``: the
        batch's reading + preprocessing time and how long the loop waited for it (the record's)."""
        self._synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            output = self._model.generate(**inputs.tensors, **self._generate_kwargs(gen_kwargs))
        self._synchronize()
        wall = time.perf_counter() - start
        new_tokens = output[:, inputs.tensors["input_ids"].shape[1]:]
        if isinstance(tasks, str):  # one task for every row
            tasks = [tasks] * len(doc_ids)
        self.recorder.record(self.handle.stats, inputs, self._model.config, tasks, doc_ids, wall,
                             int((new_tokens != self._pad_token_id).sum()), self.attempt, prepare_s, wait_s)
        return self._decoder.batch_decode(new_tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def _log_totals(self) -> None:
        """Averages into lmms-eval's ``results["throughput"]`` (``avg_<key>``) via ``log_metrics``
        (this attempt's calls; a resumable run's runner puts every attempt's in their place:
        :func:`vcast.eval.efficiency.attempts_throughput`)."""
        from lmms_eval.models.model_utils.gen_metrics import log_metrics

        payload = throughput_payload([asdict(record) for record in self.efficiency.records])
        if payload is not None:
            log_metrics(**payload)
