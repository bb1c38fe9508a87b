"""V-CAST's own compressors; importing this package registers them."""

from vcast.methods import vanilla  # noqa: F401  (registers "vanilla": keep every token)
from vcast.methods import vcast_pruning  # noqa: F401  (registers "vcast")
