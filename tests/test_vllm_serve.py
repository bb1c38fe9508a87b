"""Bad requests do not hurt the others: `vllm serve` with the plugin answers each bad request with a 400
that names its problem, while a steady stream of good requests goes on, each with the answer it had
before; the server stays up.

Runs in the vLLM environment (``make test-vllm``); skipped elsewhere. One real OpenAI-compatible server
(:func:`vcast.vllm.server.running_server`): the tiny Qwen3-VL, V-CAST at r = 0.25, vLLM's defaults
(chunked prefill, prefix caching), per-request processor options allowed (``--trust-request-mm-kwargs``)
for a request's own ratio, a 256-token context and a raised pixel cap, so that a large clip's prompt is
far over the context. Two client threads send the good request over and over while the bad ones go in:

* a corrupt mp4 and an mp4 without a frame (vLLM's video loader refuses both);
* a one-frame clip, of which the loader samples no frame (the plugin's processor names it);
* a large clip whose pruned prompt is far over the context (vLLM's length check);
* a request's own ratio out of range, or not a number.

A request's own ratio in range gets its answer, with more video tokens in its prompt than at the
server's ratio. And 16 requests sent at once through the server (16 clips, four at their own ratio) each
get the answer the same request gets alone (tests/test_vllm_chunked.py checks the same in the engine
for V-CAST and EVS, with the kept-token records).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
import urllib.error
import urllib.request
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed in this environment: make setup-vllm, then "
                                           "make test-vllm runs this test with .venv-vllm's python")
av = pytest.importorskip("av")

import numpy as np  # noqa: E402

from vllm.platforms import current_platform  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not current_platform.is_cpu(), reason="sized for vLLM's CPU build and the tiny "
                                 "checkpoint; this vLLM is a GPU build")]

CONTEXT = 256  # tokens: the good request's prompt is about 40, the large clip's over 400
NEW_TOKENS = 8
STREAMS = 2  # client threads sending the good request while the bad ones go in


def _mp4(frames: int, side: int, seed: int = 0, fps: int = 30) -> bytes:
    """An H.264 mp4 of ``frames`` random ``side`` x ``side`` frames (none: a container without a frame)."""
    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width = stream.height = side
        stream.pix_fmt = "yuv420p"
        for _ in range(frames):
            image = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def _ask(url: str, model: str, video: bytes, **options) -> tuple[int, dict]:
    """One chat request with ``video`` (greedy): the HTTP status and the JSON body."""
    body = {"model": model, "max_tokens": NEW_TOKENS, "temperature": 0.0, **options, "messages": [{
        "role": "user", "content": [
            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64," + base64.b64encode(video).decode()}},
            {"type": "text", "text": "What moves in this video?"}]}]}
    request = urllib.request.Request(f"{url}/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def _answer(body: dict) -> str:
    return body["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def server(vllm_checkpoint, tmp_path_factory):
    import vcast.vllm
    from vcast.vllm.server import running_server

    settings = {"dtype": "float32", "seed": 0, "max_model_len": CONTEXT, "enforce_eager": True,
                "limit_mm_per_prompt": {"video": 1, "image": 0}, "media_io_kwargs": {"video": {"num_frames": 16}},
                "kv_cache_memory_bytes": 64 * 2**20, "trust_request_mm_kwargs": True, "uvicorn_log_level": "warning",
                # the pixel cap raised (the checkpoint's keeps every clip within 256 tokens)
                "mm_processor_kwargs": {"size": {"longest_edge": 16 * 448 * 448, "shortest_edge": 4096}},
                **vcast.vllm.engine_kwargs(str(vllm_checkpoint), "vcast", 0.25, cpu=True)}
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with running_server(str(vllm_checkpoint), settings, log, name="vcast") as url:
        yield url, str(vllm_checkpoint), log


def test_bad_requests_get_a_400_naming_the_problem_while_good_ones_go_on(server) -> None:
    url, model, log = server
    good = _mp4(60, 128)  # 2 s: the processor samples 4 frames, 2 temporal steps of 4 x 4 tokens
    status, body = _ask(url, model, good)
    assert status == 200, body
    reference, base_prompt = _answer(body), body["usage"]["prompt_tokens"]

    # (what is sent, the words its 400 must hold)
    bad = [
        ("a corrupt mp4", dict(video=b"\x00\x00\x00\x18ftypmp42" + bytes(500)), ["video"]),
        ("an mp4 without a frame", dict(video=_mp4(0, 128)), ["video"]),
        ("a one-frame clip", dict(video=_mp4(1, 128)), ["no frame to encode", "1 frame"]),
        ("a clip far over the context", dict(video=_mp4(60, 896)), ["maximum context length", str(CONTEXT)]),
        ("a ratio out of range", dict(video=good, mm_processor_kwargs={"vcast_ratio": 1.5}), ["vcast_ratio", "1.5"]),
        ("a ratio that is no number", dict(video=good, mm_processor_kwargs={"vcast_ratio": "half"}),
         ["vcast_ratio", "half"]),
    ]
    stream: list[tuple[int, str]] = []
    stop = threading.Event()

    def keep_asking() -> None:
        while not stop.is_set():
            try:
                code, reply = _ask(url, model, good)
            except OSError as error:  # the server went away: the stream ends, saying why
                stream.append((0, repr(error)))
                return
            stream.append((code, _answer(reply) if code == 200 else json.dumps(reply)))

    threads = [threading.Thread(target=keep_asking, daemon=True) for _ in range(STREAMS)]
    for thread in threads:
        thread.start()
    try:
        for name, request, words in bad:
            before = len(stream)
            status, body = _ask(url, model, request.pop("video"), **request)
            message = body.get("error", {}).get("message", "")
            assert status == 400, f"{name}: {status} {body}"
            assert all(word in message for word in words), f"{name}: {message!r} does not say {words}"
            deadline = time.monotonic() + 300
            while len(stream) == before:  # a good request finished after each bad one went in
                assert any(thread.is_alive() for thread in threads), f"after {name}, the good requests stopped"
                assert time.monotonic() < deadline, f"after {name}, no good request finished within 300 s"
                time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=300)
    assert len(stream) >= len(bad) and stream == [(200, reference)] * len(stream), stream

    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        assert response.status == 200
    status, body = _ask(url, model, good)
    assert status == 200 and _answer(body) == reference, body
    # A request's own ratio in range: answered, with twice the server's kept video tokens (8 -> 16).
    status, body = _ask(url, model, good, mm_processor_kwargs={"vcast_ratio": 0.5})
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == base_prompt + 8, (body["usage"], base_prompt)
    # Here, not in a test of its own: pytest-xdist could run that on the other worker, with a server of its own.
    _sixteen_at_once(url, model)
    assert "Traceback" not in Path(log).read_text(encoding="utf-8")


def _sixteen_at_once(url: str, model: str) -> None:
    """16 requests sent at once (16 clips, four at their own ratio): each gets the answer it gets alone."""
    clips = [_mp4(60, 128, seed=seed) for seed in range(1, 17)]
    own = [{"mm_processor_kwargs": {"vcast_ratio": 0.5}} if 4 <= i < 8 else {} for i in range(16)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        together = list(pool.map(lambda i: _ask(url, model, clips[i], **own[i]), range(16)))
    alone = [_ask(url, model, clips[i], **own[i]) for i in range(16)]
    assert all(status == 200 for status, _ in together + alone), [body for status, body in together + alone
                                                                   if status != 200]
    for i, ((_, served_together), (_, served_alone)) in enumerate(zip(together, alone)):
        assert _answer(served_together) == _answer(served_alone), f"request {i} of 16 at once"
        assert served_together["usage"]["prompt_tokens"] == served_alone["usage"]["prompt_tokens"]
    assert together[4][1]["usage"]["prompt_tokens"] > together[0][1]["usage"]["prompt_tokens"]
