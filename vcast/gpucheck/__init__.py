"""The GPU check kit: everything that needs CUDA, in one command that runs as it is on a GPU node.

    python -m vcast.gpucheck [--cpu-small] [--out DIR] [--only PART ...]      (make gpu-check)

With CUDA it checks, in order (docs/gpu.md):

- ``tests``: the test suite's CUDA-only tests (:mod:`vcast.gpucheck.cuda_tests`);
- ``smoke``: ``attach`` + ``generate`` for every registered method on the tiny checkpoint of each
  family in bf16, against the hook-free reference where the CPU tests compare them
  (:mod:`vcast.gpucheck.smoke`);
- ``memory``: the eager-score memory guard on CUDA, and FastV / PDrop with our attention rows at 64
  frames within 1.05 x vanilla's peak memory (:mod:`vcast.gpucheck.memory`);
- ``efficiency``: the paper's efficiency table at real size (random-weight Qwen3-VL-8B at 32 and
  64 frames, LLaVA-OneVision-7B at 32) (:mod:`vcast.gpucheck.efficiency`);
- ``selection``: every compressor's selection time at 32 / 64 / 128 frames beside the LLM prefill
  it saves (:mod:`vcast.gpucheck.selection`);
- ``pipeline``: where an evaluation's total time goes (reading + preprocessing the videos against
  the model) serially and with the plugins' prefetching, on the same model
  (:mod:`vcast.gpucheck.pipeline`; needs decord, OpenCV and qwen_vl_utils).

Without CUDA (or with ``--cpu-small``) the same code runs on the CPU with small dimensions, so
the test suite can run it and the kit does not rot between GPU sessions. Only torch, transformers,
numpy and vcast's core are imported (pytest for the CUDA tests; the pipeline part's decoder
where it is there): no lmms-eval or Hydra. Output (8 files) goes to ``--out``, else ``$OUT``, else ``results/gpu/``.
"""

PARTS = ("tests", "smoke", "memory", "efficiency", "selection", "pipeline")
