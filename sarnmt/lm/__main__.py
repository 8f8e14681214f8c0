"""``python -m sarnmt.lm``: an alias of ``sarnmt lm`` (:mod:`sarnmt.cli.lm`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.lm import main

    alias("lm", main)
