"""``python -m sarnmt.analyze``: an alias of ``sarnmt analyze`` (:mod:`sarnmt.cli.analyze`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.analyze import main

    alias("analyze", main)
