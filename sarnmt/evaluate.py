"""``python -m sarnmt.evaluate``: an alias of ``sarnmt evaluate`` (:mod:`sarnmt.cli.evaluate`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.evaluate import main

    alias("evaluate", main)
