"""Every name typed on a sweep's command line exists, or is refused before any job with its spelling.

Hydra answers ``method=vcst`` with its whole search path, every config of the group and exit code
1, after the sweep has started. :func:`refusals` checks the command line first: the config-group
choices (``model=``, ``method=``, ``task=``, ``experiment=``, ``hydra/launcher=``, ... and each
value of a sweep ``method=vanilla,vcst``) against the configs Hydra can load (``configs/<group>/``
and the plugins' own, e.g. ``basic`` and ``submitit_slurm``), ``profile=`` against the profiles,
and ``variants.<method config>=<variant>`` (and the method config of ``reproduce_params.<method
config>``) against the method configs and the variants of that config's method. Then the keys
(:func:`vcast.sweep.overrides.unread_overrides`, which names the closest keys the same way).
Each problem is one line naming the word and the closest spellings (:mod:`vcast.spelling`).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from vcast.spelling import did_you_mean
from vcast.sweep.grid import _FLAGS, CONFIG_DIR, compose_job, initialized
from vcast.sweep.overrides import unread_overrides

_PER_METHOD = ("variants", "reproduce_params")  # maps keyed by method config name
_LISTED = 8  # a group with at most this many configs is listed in full when no spelling is close


def refusals(words: Sequence[str]) -> list[str]:
    """One line per word of ``words`` (the sweep's command line) that names nothing that exists, then
    one per override that no cell would read (:func:`vcast.sweep.overrides.unread_overrides`); empty
    when every name exists and every key is read."""
    return misnamed(words) + unread_overrides(words)


def misnamed(words: Sequence[str]) -> list[str]:
    """One line per name of ``words`` that no config, profile or variant has, naming the word and the
    closest spellings; empty when all exist. A malformed word is left to Hydra, which names it."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    words = [word for word in words if word not in _FLAGS]
    try:
        parsed = OverridesParser.create().parse_overrides(words)
    except HydraException:
        return []
    problems: list[Optional[str]] = []
    with initialized():
        groups = _Groups(GlobalHydra.instance().config_loader())
        for word, override in zip(words, parsed):
            if override.is_delete():
                continue
            key = override.key_or_group
            if groups.is_group(key):
                problems += groups.problems(word, key, _values(override))
            elif key == "profile":
                problems += [_profile_problem(word, value) for value in _values(override)]
            elif key.split(".", 1)[0] in _PER_METHOD:
                problems += _per_method_problems(word, key, override.value(), groups)
    return [problem for problem in problems if problem]


def _values(override: Any) -> list[str]:
    """The values of a config-group or plain override: each of a sweep, or the one; none for null,
    an interpolation, a glob (Hydra expands it from the configs that exist) or a dict or list."""
    from hydra.errors import HydraException

    if override.is_sweep_override():
        try:
            values = list(override.sweep_string_iterator())
        except HydraException:  # glob(): needs Hydra's config loader, and names only configs that exist
            return []
    else:
        value = override.value()
        values = [value] if isinstance(value, str) else []
    return [value for value in values if value and not value.startswith("${")]


class _Groups:
    """Hydra's config groups and the configs of each, as the sweep's Hydra would load them."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._all: Optional[list[str]] = None

    def is_group(self, key: str) -> bool:
        """Whether override ``key`` chooses a config (``method``, ``hydra/launcher``, a misspelled
        ``hydra/launchr``) rather than setting a value."""
        return "/" in key or key in self._loader.list_groups("")

    def options(self, group: str) -> list[str]:
        """The configs of ``group``, sorted (empty for a group that does not exist)."""
        return list(self._loader.get_group_options(group))

    def problems(self, word: str, group: str, values: Sequence[str]) -> list[str]:
        """Why ``word`` (``group=<values>``) names a group or a config that does not exist."""
        parent, _, leaf = group.rpartition("/")
        if leaf not in self._loader.list_groups(parent):
            hint = did_you_mean(group, self._every_group()) or f"{_ls(group.split('/')[0])} lists the groups"
            return [f"{word}: no config group {group!r}; {hint}"]
        options = self.options(group)
        return [choice_problem(word, group, value, options) for value in values if value not in options]

    def _every_group(self) -> list[str]:
        if self._all is None:
            found: list[str] = []
            pending = [""]
            while pending:
                parent = pending.pop(0)
                for name in sorted(self._loader.list_groups(parent)):
                    path = f"{parent}/{name}" if parent else name
                    found.append(path)
                    pending.append(path)
            self._all = found
        return self._all


def choice_problem(word: str, group: str, value: str, options: Sequence[str]) -> str:
    """``word``'s line for ``value``, a config that ``group`` does not have: the closest spellings,
    else the configs (a short group) or where they are listed."""
    hint = did_you_mean(value, options)
    if not hint:
        hint = (f"{group} configs: {', '.join(options)}" if len(options) <= _LISTED else
                f"{_ls(group)} lists the {len(options)} {group} configs")
    return f"{word}: no {group} config {value!r}; {hint}"


def _ls(group: str) -> str:
    """The shell command that lists ``configs/<group>`` from where the sweep was started."""
    return f"ls {os.path.relpath(CONFIG_DIR / group)}"


def _profile_problem(word: str, value: str) -> Optional[str]:
    from vcast.sweep.profiles import PROFILES

    if value in PROFILES:
        return None
    hint = did_you_mean(value, PROFILES)
    return f"{word}: no profile {value!r}; " + (f"{hint} " if hint else "") + f"(profiles: {', '.join(PROFILES)})"


def _per_method_problems(word: str, key: str, value: Any, groups: _Groups) -> list[Optional[str]]:
    """``variants.<method config>=<variant>``, ``variants={<method config>: <variant>}`` and
    ``reproduce_params.<method config>...``: the method configs exist, the variants are the method's."""
    path = key.split(".")
    if len(path) > 1:
        entries: Mapping[str, Any] = {path[1]: value if len(path) == 2 else None}
    elif isinstance(value, Mapping):
        entries = value
    else:
        return []
    methods = groups.options("method")
    problems: list[Optional[str]] = []
    for method, variant in entries.items():
        if str(method) not in methods:
            problems.append(choice_problem(word, "method", str(method), methods))
        elif path[0] == "variants" and isinstance(variant, str):
            problems.append(_variant_problem(word, str(method), variant))
    return problems


def _variant_problem(word: str, method: str, variant: str) -> Optional[str]:
    """Why method config ``method`` cannot run ``variant``, or None (also for a method that is not
    registered: pre-flight names it)."""
    from vcast.registry import method_variants

    method_id = str(compose_job([f"method={method}"]).method.id)
    try:
        variants = method_variants(method_id)
    except ValueError:
        return None
    if variant in variants:
        return None
    hint = did_you_mean(variant, variants)
    return (f"{word}: method {method_id!r} (config {method!r}) has no variant {variant!r}; " +
            (f"{hint} " if hint else "") + f"(it has {', '.join(variants)})")
