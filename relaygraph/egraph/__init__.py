"""E-graphs: the egglog bridge, saturation, extraction (``relaygraph.egraph.extract``) and cost models.

Nothing here imports egglog when the package is imported; the modules that need it import it
on first use.
"""
