"""The report stage: results trees -> the paper's tables (CSV, LaTeX, Markdown) and figures.

``python -m vcast.report --help``; ``make table-qwen3vl-8b`` and friends (see the README).
"""
