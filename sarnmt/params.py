"""``python -m sarnmt.params``: an alias of ``sarnmt params`` (:mod:`sarnmt.cli.params`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.params import main

    alias("params", main)
