"""Where a cell's files are, relative to its folder
(``results/<experiment>/<model>/<frames>f/<method>/r<ratio>/<task>/``).

Writers name their files from here; only :mod:`vcast.results` reads them
(``tests/test_results_reader.py`` fails on a module that reads them itself).
"""

from __future__ import annotations

CELL_FILE = "cell.json"            # the cell's record (vcast.results.record)
DONE_FILE = "DONE"                 # present only when the cell finished with status ok
RUN_LOG = "run.log"                # every attempt's output, one header line per attempt
LMMS_EVAL_DIR = "lmms_eval"        # lmms-eval's --output_path: *_results.json, *_samples_<task>.jsonl
EFFICIENCY_DIR = "efficiency"      # per-call records, rank<r>.jsonl (vcast.eval.efficiency)
EFFICIENCY_RECORDS = "rank*.jsonl"
KEPT_DIR = "kept"                  # kept-token records, rank<r>.jsonl (vcast.kept_records)
KEPT_RECORDS = "rank*.jsonl"
CACHE_DIR = "cache"                # the response cache of a resumable cell (vcast.eval.resume)
IDENTITY_FILE = "identity.json"    # in cache/: the cell identity its answers belong to
