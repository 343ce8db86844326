"""Extraction: choose one node per needed e-class, acyclic and complete, under a cost.

    g = rg.extract.load_gym("vgg.json")          # or rg.extract.from_egglog(egraph, roots)
    r = rg.extract.greedy_dag(g)                 # tree, greedy_dag, ilp, egglog_extract
    rg.extract.check(g, r.choice) == r.dag_cost  # the independent checker

Costs are the node costs of the e-graph; ``apply_cost`` replaces them with a cost model from
``relaygraph.egraph.cost`` (``rg.extract.cost``).
"""

from .. import cost
from ..cost import apply_cost
from .check import ExtractionResult, InvalidChoice, check, dag_cost, find_cycle, tree_cost
from .egglog_extract import egglog_extract
from .greedy import greedy_dag
from .gym import ExtractionError, ExtractionGraph, from_egglog, from_json, load_gym
from .ilp import ilp
from .tree import tree

__all__ = [
    "ExtractionError", "ExtractionGraph", "ExtractionResult", "InvalidChoice", "apply_cost", "check",
    "cost", "dag_cost", "egglog_extract", "find_cycle", "from_egglog", "from_json", "greedy_dag", "ilp",
    "load_gym", "tree", "tree_cost",
]
