"""``python -m vcast.report site [results root]``: a static results site that opens from disk.

    python -m vcast.report site results/demo                  # results/demo/site/index.html
    python -m vcast.report site results --out /tmp/site --compare paper

Pages (plain HTML and one style sheet; no server, no network; four small inline scripts,
:mod:`~vcast.report.site.scripts`: a row filter, table sorting, the item page's method picker and
its kept maps):

* ``index.html``: the experiments under the root: every folder holding sweep cells
  (``<experiment>/<model>/<frames>f/<method>/r<ratio>/<task>/``); the root itself when it is one
  (``results/demo``).
* ``<experiment>/index.html``: each report table exactly as its CSV has it (the target's outputs:
  ``<results>/<out_dir>`` or ``<results>/tables`` and ``<results>/figures``, and any CSV / PNG /
  PDF in the experiment's folder), with ``--compare paper`` the published value and our printed
  value minus it for tables in a paper layout; the figures (PNG shown, PDF linked); the
  per-sample analysis (``*-analysis.csv``, its Markdown); every cell with its status.
* ``<experiment>/cells/<cell>.html``: a cell's spec, status, error, versions, scores, efficiency
  (``cell.json`` and a summary of ``efficiency/rank*.jsonl``), missing videos, its log's end.
* ``<experiment>/items/``: the item browser (:mod:`vcast.report.site.item_pages`,
  :mod:`vcast.report.site.items`).

The build is incremental and atomic: each output's inputs (their size and mtime) and what the
page shows are fingerprinted in ``.site-manifest.json``; an unchanged output is not rendered
again, a changed one is written to a temporary name and renamed over the old one. Pages are
written before the pages that link to them (images, items, cells, experiments, then the index)
and outputs no longer produced are deleted last, so a build cut off at any point leaves a site
whose links all resolve; the next build finishes the job.

Modules: :mod:`~vcast.report.site.discovery` (what the root holds), one per page kind
(:mod:`~vcast.report.site.cell_page`, :mod:`~vcast.report.site.experiment_page`,
:mod:`~vcast.report.site.item_pages`), :mod:`~vcast.report.site.build` (the build and its command),
:mod:`~vcast.report.site.html` (every piece of HTML), :mod:`~vcast.report.site.scripts` (the
pages' JavaScript), :mod:`~vcast.report.site.writer` (incremental, atomic output).
"""

from vcast.report.site.build import SiteBuild, add_arguments, build_site, run
from vcast.report.site.discovery import Experiment, find_experiments
from vcast.report.site.experiment_page import paper_rows, render_experiment

__all__ = ["Experiment", "SiteBuild", "add_arguments", "build_site", "find_experiments", "paper_rows",
           "render_experiment", "run"]
