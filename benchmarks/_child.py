"""A benchmark script measuring in a child process of its own: the child is the script itself,
run again with a hidden option naming a file where it writes its result as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile


def json_from_child(script: str, args: list[str], out_option: str, env: dict | None = None):
    """Run ``script`` with ``args`` and ``out_option FILE`` in a new Python process (with ``env``);
    (what it wrote to FILE, or None when it exited with an error or wrote nothing; its exit code)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        code = subprocess.call([sys.executable, script, *args, out_option, out], env=env)
        if code != 0 or not os.path.exists(out):
            return None, code
        with open(out) as f:
            return json.load(f), code
