"""python -m gemmtune.report ... (what `gemmtune report` runs): see cli.py."""
import sys

from .cli import main

sys.exit(main())
