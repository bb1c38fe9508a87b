"""Code shared by several baselines: clustering (DPC-kNN), the assembly of a ``Selection`` from
kept positions, the model inputs a compressor reads, in-LLM attention scores, and the citations
two registrations of one paper share (``papers``). It registers nothing and imports no method
package."""
