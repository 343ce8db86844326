"""Studies: grids of extraction and optimization tasks, run on local processes or Dask, with
resumable results in SQLite (``rg.study.run(spec)``, ``rg.study.load(db)``).

Dask and distributed (the ``study`` extra) are imported only when a cluster is asked for.
"""

from __future__ import annotations

from .report import export_csv, format_status, load, show, status
from .runner import default_database, run
from .spec import Cell, Spec, StudyError, load_spec, parse_spec

__all__ = ["run", "load", "status", "format_status", "show", "export_csv", "load_spec", "parse_spec",
           "Spec", "Cell", "StudyError", "default_database"]
