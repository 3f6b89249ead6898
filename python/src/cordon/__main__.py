"""``python -m cordon ARGS`` runs the binary with ARGS, as the ``cordon`` command does."""

from __future__ import annotations

import os
import sys

from .binary import find_binary


def main() -> None:
    """Replaces this process with the binary."""
    binary = find_binary()
    os.execv(binary, [binary, *sys.argv[1:]])


if __name__ == "__main__":
    main()
