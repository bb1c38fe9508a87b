"""Compressors by name. A compressor is ``fn(frames [T, P, D], ratio, **params) -> Selection``.

V-CAST registers itself from :mod:`vcast.methods`; the baselines register from the top-level
``baselines`` package, which is imported the first time a name is looked up.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from typing import Any, Callable

from vcast.selection import Selection

logger = logging.getLogger(__name__)

Compressor = Callable[..., Selection]

_REGISTRY: dict[str, Compressor] = {}
_PLUGIN_PACKAGES = ("vcast.methods", "baselines")
_plugins_loaded = False


def register_method(name: str) -> Callable[[Compressor], Compressor]:
    """Decorator: make ``fn`` available as ``vcast.select(..., method=name)``."""

    def decorator(fn: Compressor) -> Compressor:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"method {name!r} is already registered by {_REGISTRY[name].__module__}")
        _REGISTRY[name] = fn
        return fn

    return decorator


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    for package in _PLUGIN_PACKAGES:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError as error:
            if error.name != package:
                raise
            logger.debug("compressor package %s is not installed", package)
    # Only once every import worked: a broken plugin keeps failing loudly instead of vanishing.
    _plugins_loaded = True


def available_methods() -> list[str]:
    """Sorted names usable as ``method=``."""
    _load_plugins()
    return sorted(_REGISTRY)


def get_method(name: str) -> Compressor:
    """The compressor registered as ``name``; ValueError naming the choices otherwise."""
    _load_plugins()
    if name not in _REGISTRY:
        raise ValueError(f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def method_params(name: str) -> dict[str, Any]:
    """The keyword parameters of method ``name`` with their defaults."""
    signature = inspect.signature(get_method(name))
    return {
        p.name: p.default
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def check_params(name: str, params: dict[str, Any]) -> None:
    """ValueError naming any parameter that method ``name`` does not take."""
    accepted = method_params(name)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for method {name!r}; "
            f"accepted: {', '.join(accepted) or 'none'}"
        )
