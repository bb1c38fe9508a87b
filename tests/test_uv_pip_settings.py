"""scripts/uv_pip_settings.py: pip's settings as uv options, for make setup's uv installs."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "uv_pip_settings.py"
spec = importlib.util.spec_from_file_location("uv_pip_settings", SCRIPT)
uv_pip_settings = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_pip_settings)

LISTING = """\
:env:.find-links='/opt/wheels'
:env:.default-timeout='180'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/pip/caps.txt'
global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.find-links='/srv/other-wheels'
global.index-url='https://mirror.example/simple'
install.index-url='https://install-mirror.example/simple'
download.index-url='https://download-only.example/simple'
not a setting line
"""


def test_pip_settings_become_uv_options_with_pips_precedence() -> None:
    settings = uv_pip_settings.pip_settings(LISTING)
    # PIP_FIND_LINKS replaces the files' find-links and [install] [global], as for pip install; another
    # command's section and what uv does not need are left out
    assert settings == {"constraint": ["/etc/pip/caps.txt"], "extra-index-url": ["file:///opt/a/simple",
                        "file:///opt/b/simple"], "find-links": ["/opt/wheels"],
                        "index-url": ["https://install-mirror.example/simple"]}
    assert uv_pip_settings.uv_options(settings) == [
        "--index-strategy", "unsafe-best-match", "--index-url", "https://install-mirror.example/simple",
        "--extra-index-url", "file:///opt/a/simple", "--extra-index-url", "file:///opt/b/simple",
        "--find-links", "/opt/wheels", "--constraint", "/etc/pip/caps.txt"]


def test_no_pip_settings_is_pips_rule_alone() -> None:
    assert uv_pip_settings.uv_options(uv_pip_settings.pip_settings("")) == ["--index-strategy", "unsafe-best-match"]


def test_the_script_prints_shell_words_from_this_machines_pip() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    words = shlex.split(done.stdout)
    assert words[:2] == ["--index-strategy", "unsafe-best-match"] and len(words) % 2 == 0
    assert {word for word in words[::2]} <= {"--index-strategy", *uv_pip_settings.OPTIONS.values()}
