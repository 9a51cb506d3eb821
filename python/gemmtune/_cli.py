"""The `gemmtune` command of an installed package: runs the CLI binary shipped inside it
(gemmtune/_bin/gemmtune), with this interpreter and this installation's kernel sources as the
compile workers' defaults ($GEMMTUNE_PYTHON / $GEMMTUNE_PYTHON_DIR still win)."""

import os
import sys


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.path.join(here, "_bin", "gemmtune")
    if not os.access(exe, os.X_OK):
        sys.exit(f"gemmtune: no CLI binary at {exe} (this copy of the package was not built by pip)")
    env = dict(os.environ)
    env.setdefault("GEMMTUNE_PYTHON", sys.executable)
    env.setdefault("GEMMTUNE_PYTHON_DIR", os.path.dirname(here))
    os.execve(exe, [exe, *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
