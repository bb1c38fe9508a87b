"""Re-implemented baseline compressors (one file per method).

Every module of this package is imported here, in name order, so each registers its methods
with :func:`vcast.register_method` and ``vcast.available_methods()`` lists them. Shared helpers
(clustering, output assembly) register nothing.
"""

import importlib
import pkgutil

for _module in sorted(info.name for info in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
