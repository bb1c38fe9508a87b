"""Re-implemented baseline compressors: one package per registered method.

A method's package holds its registration in ``method.py`` (parameters, defaults, variants and
its facts, no algorithm), one module per variant named after the variant string (``paper.py``,
``official.py``, ``vidcom2_qwen.py``) and its own helpers. Code several methods share lives in
:mod:`baselines.common`; the simplest methods share :mod:`baselines.simple`.

Importing this package imports every ``<package>.method`` in name order, so each registers its
method with :func:`vcast.registry.register_method` and ``vcast.available_methods()`` lists it.
"""

import importlib
import importlib.util
import pkgutil

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    if _info.ispkg and importlib.util.find_spec(f"{__name__}.{_info.name}.method") is not None:
        importlib.import_module(f"{__name__}.{_info.name}.method")
