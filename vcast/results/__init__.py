"""A results tree, read one way: the typed cell record (:mod:`vcast.results.record`) and the
reader every stage uses (:mod:`vcast.results.tree`)."""
