"""Code shared by several baselines: clustering (DPC-kNN), the assembly of a ``Selection`` from
kept positions, the model inputs a compressor reads, and in-LLM attention scores. It registers
nothing and imports no method package."""
