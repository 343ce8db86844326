"""Extraction: pick one node per needed e-class, acyclic and complete, under a cost."""

from .check import ExtractionResult, InvalidChoice, check, dag_cost, tree_cost
from .graph import ExtractionError, ExtractionGraph, from_egglog, from_json, load_gym
from .greedy import greedy_dag
from .tree import tree
from .ilp import ilp
