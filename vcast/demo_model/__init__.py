"""The demo model: a 1.2 M-parameter Qwen3-VL trained here, on CPU, on the synthetic benchmark.

``make demo-model`` runs :mod:`vcast.demo_model.train` with :class:`vcast.demo_model.recipe.Recipe`
and writes ``checkpoints/demo_qwen3_vl`` (kept in the repository, with ``training.json``,
``loss_curve.csv`` and ``SHA256SUMS``). It is a toy that answers the synthetic questions, so the
demo's accuracies can be wrong; it says nothing about real benchmarks.
"""
