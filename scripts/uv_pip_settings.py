"""Print the uv options that reproduce this machine's pip settings: ``python3 scripts/uv_pip_settings.py``.

``make setup`` installs with ``uv pip install`` (the same resolution as pip, several times faster),
but uv reads none of pip's configuration. A site that points pip at a mirror, a folder of wheels or
a constraints file (``pip.conf``, ``PIP_*`` variables) would otherwise see uv go to PyPI instead, and
some wheels exist only there (a CPU build of torch, say). This reads pip's own view of its settings
(``pip config list``) and prints them as uv options, one shell word each, with pip's rule for
choosing among several indexes (the best version from any of them, ``unsafe-best-match``).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

# pip's setting -> uv's option. A list setting is space-separated, as pip writes it.
OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
           "find-links": "--find-links", "constraint": "--constraint"}
# `pip config list` prints one `<section>.<name>='<value>'` per line, its configuration files already
# merged in pip's order. `pip install` reads the [install] section over [global], and a PIP_* variable
# (section :env:) over both; other commands' sections are not install's.
LINE = re.compile(r"^(?P<section>[^.]+)\.(?P<name>[a-z-]+)='(?P<value>.*)'$")
PRECEDENCE = {"global": 0, "install": 1, ":env:": 2}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """``{name: values}`` of the settings uv needs, from ``pip config list``'s output, each from the
    source pip itself would take it from."""
    found: dict[str, tuple[int, list[str]]] = {}
    for line in listing.splitlines():
        match = LINE.match(line.strip())
        if match is None or match["name"] not in OPTIONS or match["section"] not in PRECEDENCE:
            continue
        rank = PRECEDENCE[match["section"]]
        if match["name"] not in found or rank >= found[match["name"]][0]:
            found[match["name"]] = (rank, match["value"].split())
    return {name: values for name, (_, values) in found.items()}


def uv_options(settings: dict[str, list[str]]) -> list[str]:
    options = ["--index-strategy", "unsafe-best-match"]
    for name, option in OPTIONS.items():
        for value in dict.fromkeys(settings.get(name, [])):
            options += [option, value]
    return options


def main() -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    settings = pip_settings(listing.stdout) if listing.returncode == 0 else {}
    print(shlex.join(uv_options(settings)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
