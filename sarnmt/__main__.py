"""``python -m sarnmt <command> [overrides]``: the ``sarnmt`` script (:func:`sarnmt.cli.main`), for an environment
whose scripts folder is not on ``PATH``; the same commands (:data:`sarnmt.cli.COMMANDS`), the same exit statuses. The
``python -m`` aliases that packages below the commands' floor keep (``python -m sarnmt.human``) run this module
(:func:`sarnmt.utils.hydra_app.run_alias`): their command, under their own program name (:func:`sarnmt.cli.aliased`)."""

import sys

from sarnmt.cli import alias, aliased, main

if __name__ == "__main__":
    name = aliased()
    sys.exit(alias(name) if name is not None else main(prog="python -m sarnmt"))
