"""``python -m sarnmt.score``: an alias of ``sarnmt score`` (:mod:`sarnmt.cli.score`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.score import main

    alias("score", main)
