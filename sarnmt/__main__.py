"""``python -m sarnmt <command> [overrides]``: the ``sarnmt`` script (:func:`sarnmt.cli.main`), for an environment
whose scripts folder is not on ``PATH``; the same commands (:data:`sarnmt.cli.COMMANDS`), the same exit statuses."""

import sys

from sarnmt.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m sarnmt"))
