"""Qwen3-VL's adapter: the shared Qwen layout of :mod:`vcast.models.mrope_adapter`, which was
written for this family (one run of ``P`` video tokens per temporal patch, each after its
``<t seconds><vision_start>``; 4-row MRoPE ids; DeepStack rows that follow the kept tokens)."""

from __future__ import annotations

from vcast.models.mrope_adapter import MRopeAdapter


class Qwen3VLAdapter(MRopeAdapter):
    """The shared Qwen adapter as it is (see the module docstring)."""
