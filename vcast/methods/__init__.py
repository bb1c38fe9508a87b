"""V-CAST's own compressors, one package per registered method; importing this package registers them.

Each package holds its registration in ``method.py`` (parameters, defaults, checks, facts and
the dispatch to its variants) and its algorithm in the modules beside it.
"""

from vcast.methods.vanilla import method as _vanilla  # noqa: F401  (registers "vanilla": keep every token)
from vcast.methods.vcast import method as _vcast  # noqa: F401  (registers "vcast")
