"""``python -m sarnmt.prepare``: an alias of ``sarnmt prepare`` (:mod:`sarnmt.cli.prepare`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.prepare import main

    alias("prepare", main)
