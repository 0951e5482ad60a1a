"""The pinned CPU kernels (kernels.env at the repository root), set before torch starts.

    import kernels; kernels.pin()    # first, before `import torch`

torch reads these variables once, when it starts; set later, they do nothing.
"""

import os
import sys
from pathlib import Path

ENV_FILE = Path(__file__).resolve().parent.parent / "kernels.env"


def pinned() -> dict:
    """{variable: value} from kernels.env (comments and blank lines skipped)."""
    out = {}
    for line in ENV_FILE.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def pin() -> dict:
    """Set the pinned variables in this process's environment; torch must not be imported yet."""
    wanted = pinned()
    if "torch" in sys.modules and any(os.environ.get(k) != v for k, v in wanted.items()):
        raise RuntimeError(
            f"torch was imported before the kernels were pinned ({wanted}): call kernels.pin() first"
        )
    os.environ.update(wanted)
    return wanted
