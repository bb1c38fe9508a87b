"""The model families vcast runs, one package each (``vcast/families/<name>/``), and how to find one.

Every package declares one :class:`~vcast.families.family.Family` as ``FAMILY`` in its ``__init__``;
this registry imports the packages it finds here (no list to edit) and answers the rest of vcast:
:func:`family_of` (a model, a config, or a ``model_type``), :func:`get_family` (a name, with a
did-you-mean), :func:`family_for_plugin` (an lmms-eval id) and :func:`family_for_arch` (a tiny
checkpoint arch). Nothing outside a family's package names a family.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Optional

from vcast.families.family import Family, PublishedModel
from vcast.spelling import did_you_mean

__all__ = ["Family", "PublishedModel", "all_families", "family_of", "get_family", "family_for_plugin",
           "family_for_arch", "all_archs", "published_models"]

_FAMILIES: Optional[dict[str, Family]] = None


def _load() -> dict[str, Family]:
    global _FAMILIES
    if _FAMILIES is None:
        found: dict[str, Family] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda item: item.name):
            if not info.ispkg:
                continue
            family = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
            if not isinstance(family, Family):
                raise TypeError(f"vcast/families/{info.name}/__init__.py must declare FAMILY = Family(...)")
            if family.name != info.name:
                raise ValueError(f"vcast/families/{info.name} declares the family {family.name!r}; a family's "
                                 "package is named after it")
            _check_unique(found, family)
            found[family.name] = family
        _FAMILIES = found
    return _FAMILIES


def _check_unique(found: dict[str, Family], family: Family) -> None:
    for other in found.values():
        for attribute in ("model_types", "archs", "hf_classes"):
            shared = set(getattr(other, attribute)) & set(getattr(family, attribute))
            if shared:
                raise ValueError(f"families {other.name!r} and {family.name!r} both declare {attribute} {sorted(shared)}")
        if other.plugin_id == family.plugin_id:
            raise ValueError(f"families {other.name!r} and {family.name!r} share the plugin id {family.plugin_id!r}")


def all_families() -> tuple[Family, ...]:
    """Every family, by name."""
    return tuple(_load().values())


def get_family(name: str) -> Family:
    """The family called ``name``; ValueError with a did-you-mean otherwise."""
    families = _load()
    if name not in families:
        hint = did_you_mean(name, families)
        raise ValueError(f"unknown model family {name!r}; {hint + ' ' if hint else ''}families: {', '.join(families)}")
    return families[name]


def _model_type(model: Any) -> str:
    if isinstance(model, str):
        return model
    if isinstance(model, dict):
        return str(model.get("model_type", ""))
    config = getattr(model, "config", model)  # a model instance, or a config object
    return str(getattr(config, "model_type", ""))


def family_of(model: Any) -> Family:
    """The family of a model instance, a config (object or dict) or a ``model_type`` string.

    Raises:
        TypeError: naming the model type (and class) when no family covers it.
    """
    model_type = _model_type(model)
    for family in _load().values():
        if model_type in family.model_types:
            return family
    covered = ", ".join(f"{t} ({f.display})" for f in _load().values() for t in f.model_types)
    kind = f"{type(model).__name__} " if not isinstance(model, (str, dict)) else ""
    raise TypeError(f"vcast does not support the {kind}model_type {model_type!r}; supported: {covered}")


def family_for_plugin(plugin_id: str) -> Optional[Family]:
    """The family whose lmms-eval plugin is ``plugin_id``, or None (vLLM's and unknown plugins)."""
    return next((family for family in _load().values() if family.plugin_id == plugin_id), None)


def family_for_arch(arch: str) -> Family:
    """The family of tiny-checkpoint arch ``arch``; ValueError with a did-you-mean otherwise."""
    for family in _load().values():
        if arch in family.archs:
            return family
    archs = all_archs()
    hint = did_you_mean(arch, archs)
    raise ValueError(f"unknown arch {arch!r}; {hint + ' ' if hint else ''}expected one of {', '.join(archs)}")


def all_archs() -> tuple[str, ...]:
    """Every tiny-checkpoint arch, family by family."""
    return tuple(arch for family in _load().values() for arch in family.archs)


def published_models() -> tuple[tuple[Family, PublishedModel], ...]:
    """Every released checkpoint with a model config, with its family."""
    return tuple((family, model) for family in _load().values() for model in family.published)
