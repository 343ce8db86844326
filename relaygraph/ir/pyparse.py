"""Python's own parser (``ast``), one thread at a time.

Rule conditions and attribute keys are read with ``ast``. CPython 3.11 before 3.11.8 can fail
``ast.parse`` run by two threads at once ("AST constructor recursion depth mismatch",
gh-106905), so every ``ast.parse`` / ``ast.literal_eval`` of the project takes turns on this lock.
"""

from __future__ import annotations

import threading

__all__ = ["AST_LOCK"]

AST_LOCK = threading.Lock()
