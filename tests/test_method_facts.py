"""A method's facts are declared once, where it registers, and everything that names a method reads
them: the report's display names, the vLLM backend's method list and the docs' method table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vcast.method_facts import MethodFacts
from vcast.method_table import PAGE, method_table, page_table
from vcast.registry import (available_methods, get_method, method_facts, method_kind, method_variants,
                            register_method, vllm_methods)
from vcast.report.names import latex, method_latex, method_name
from vcast.variants import PAPER

REPO = Path(__file__).resolve().parents[1]
# ``owner/repo@commit path...`` (a release tag for vLLM, whose file EVS's official variant loads).
SOURCE = re.compile(r"^[\w.-]+/[\w.-]+@(?:[0-9a-f]{7,40}|v\d[\w.]*) \S+")


@pytest.mark.parametrize("name", available_methods())
def test_every_method_declares_its_facts(name: str) -> None:
    facts = method_facts(name)
    assert facts.display and facts.display != name, f"{name}: no display name"
    for variant in method_variants(name):
        if variant != PAPER:  # a variant other than ours follows released code, named with its commit
            assert SOURCE.match(facts.code.get(variant, "")), f"{name} {variant}: {facts.code.get(variant)!r}"
    assert method_name(name) == facts.display
    assert latex(facts.display) in method_latex(name)


def test_the_baselines_package_has_a_folder_per_method() -> None:
    """``baselines/<name>/method.py`` registers ``<name>``; the simple methods share ``baselines/simple``."""
    assert not sorted((REPO / "baselines").glob("[!_]*.py")), "a method file outside a package"
    folders = {path.parent.name for path in (REPO / "baselines").glob("*/method.py")}
    modules = {name: get_method(name).__module__ for name in available_methods()}
    baselines = {name for name, module in modules.items() if module.startswith("baselines.")}
    packaged = {name for name in baselines if modules[name] == f"baselines.{name}.method"}
    assert folders - {"simple"} == packaged
    assert {modules[name] for name in baselines - packaged} == {"baselines.simple.method"}
    ours = {name for name, module in modules.items() if module.startswith("vcast.")}
    assert {modules[name] for name in ours} == {f"vcast.methods.{name}.method" for name in ours}


def test_vllm_methods_are_the_ones_whose_facts_say_so() -> None:
    from vcast.vllm import VLLM_METHODS

    assert VLLM_METHODS == vllm_methods()
    assert set(VLLM_METHODS) == {name for name in available_methods() if method_facts(name).vllm}
    assert all(method_kind(name) == "vision" for name in VLLM_METHODS)
    vllm_page = (REPO / "docs" / "vllm.md").read_text(encoding="utf-8")
    line = next(line for line in vllm_page.splitlines() if "vcast.vllm.VLLM_METHODS" in line)
    assert set(re.findall(r"`(\w+)`", line.split("(`vcast.vllm.VLLM_METHODS`")[0])) == set(VLLM_METHODS)


def test_the_docs_method_table_is_the_registry_s() -> None:
    """Adding a method or changing its facts: run ``python -m vcast.method_table --write``."""
    assert page_table(PAGE.read_text(encoding="utf-8")) == method_table()


def test_the_fidelity_page_names_the_code_each_variant_follows() -> None:
    """Each released-code variant's repository and commit are on its row of the fidelity table."""
    fidelity = (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8")
    missing = []
    for name in available_methods():
        for variant, source in method_facts(name).code.items():
            if variant == PAPER:  # ours: the table lists the released code, not our reading of it
                continue
            repo_commit = source.split()[0]
            rows = [line for line in fidelity.splitlines() if line.startswith("|") and f"`{variant}`" in line]
            if not any(repo_commit in row for row in rows):
                missing.append(f"{name} {variant}: {repo_commit}")
    assert missing == []


def test_every_registered_method_has_a_config() -> None:
    configs = {path.stem for path in (REPO / "configs" / "method").glob("*.yaml")}
    assert sorted(set(available_methods()) - configs) == []


def test_facts_must_fit_the_variants() -> None:
    with pytest.raises(ValueError, match=r"variant\(s\) \['official'\] it does not have"):
        register_method("facts_probe", facts=MethodFacts(display="Probe", code={"official": "a/b@1234567 x.py"}))
    with pytest.raises(ValueError, match="no variant at all"):
        register_method("facts_probe", facts=MethodFacts(display="Probe", code={"offical": "a/b@1234567 x.py"}))
    assert "facts_probe" not in available_methods()


def test_the_full_demo_runs_every_method() -> None:
    """``make demo-full`` runs every registered method (but PDrop, whose layer-averaged ratio must
    exceed 1/4 on the 4-layer demo model), and V-CAST with uniform allocation besides: a new method
    is one word in configs/experiment/demo_full.yaml. ``make demo``'s 10 come first, in its order."""
    from vcast.sweep.grid import experiment_methods

    listed = experiment_methods("demo")  # demo.yaml's, then demo_full.yaml's others
    assert sorted(set(available_methods()) - {"pdrop"} - set(listed)) == []
    assert sorted(set(listed) - set(available_methods())) == ["vcast_uniform"]
    assert listed[:10] == ["vanilla", "vcast", "vcast_uniform", "uniform", "random", "visionzip", "fastvid",
                           "holitom", "vidcom2", "flashvid"]
