"""Test helpers: tiny random-weight checkpoints of the real video-LLM classes, built offline."""

from vcast.testing.tiny_checkpoints import ARCHS, SIZES, build_tiny_checkpoint, checkpoint_spec

__all__ = ["ARCHS", "SIZES", "build_tiny_checkpoint", "checkpoint_spec"]
