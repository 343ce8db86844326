"""``relaygraph.dataflow_pattern``: TVM's name for the pattern language in ``relaygraph.rewrite``."""

from .rewrite.dataflow_pattern import *  # noqa: F403
from .rewrite.dataflow_pattern import __all__  # noqa: F401
