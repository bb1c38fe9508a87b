"""Re-implemented baseline compressors (one file per method).

Each module registers its methods with :func:`vcast.register_method` when imported; import
them here so that ``vcast.available_methods()`` lists them.
"""
