"""Which model instances have a vcast handle attached: at most one each, forgotten on detach."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Optional

from torch import nn

if TYPE_CHECKING:
    from vcast.models.handle import PruningHandle

# Weak keys: a model that is garbage-collected takes its entry with it.
_ATTACHED: "weakref.WeakKeyDictionary[nn.Module, PruningHandle]" = weakref.WeakKeyDictionary()


def attached_handle(model: nn.Module) -> Optional["PruningHandle"]:
    """The handle attached to ``model``, or None."""
    return _ATTACHED.get(model)


def remember(model: nn.Module, handle: "PruningHandle") -> None:
    """Record ``handle`` as ``model``'s attached handle."""
    _ATTACHED[model] = handle


def forget(model: nn.Module, handle: "PruningHandle") -> None:
    """Drop ``model``'s entry if it is still ``handle`` (a newer handle stays)."""
    if _ATTACHED.get(model) is handle:
        del _ATTACHED[model]
