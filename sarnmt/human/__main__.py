"""``python -m sarnmt.human COMMAND [key=value ...]``: see :mod:`sarnmt.human.cli`."""

import sys

from sarnmt.human.cli import main

if __name__ == "__main__":
    sys.exit(main())
