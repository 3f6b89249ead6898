"""Where the ``cordon`` binary is.

The wheel carries the binary as a script (maturin's ``bindings = "bin"``, as ruff and uv ship
theirs), so pip installs it in the ``bin/`` directory of the environment the package is
installed in; that is where it is looked for first, not on ``PATH``, so that the package runs
the binary it came with.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

from .errors import BinaryNotFoundError

#: The variable that names another binary (a development build, say).
ENV = "CORDON_BIN"


def find_binary() -> str:
    """The path of the ``cordon`` binary: ``$CORDON_BIN`` when set, else the one installed
    with this package (the environment's scripts directory, or the user's for a ``--user``
    install), else one on ``PATH``."""
    override = os.environ.get(ENV)
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise BinaryNotFoundError(f"{ENV} is {override!r}, which is not an executable file")
    for scheme in _schemes():
        scripts = sysconfig.get_path("scripts", scheme)
        candidate = Path(scripts) / "cordon"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("cordon")
    if found:
        return found
    raise BinaryNotFoundError(
        "the cordon binary was not found: install this package with pip (its wheel carries the "
        f"binary), or set {ENV} to the path of one"
    )


def _schemes() -> list[str]:
    """The install schemes whose scripts directory may hold the binary: this environment's,
    then the user's."""
    schemes = [sysconfig.get_default_scheme()]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names() and sys.prefix == sys.base_prefix:
        schemes.append(user)
    return schemes
