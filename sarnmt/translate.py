"""``python -m sarnmt.translate``: an alias of ``sarnmt translate`` (:mod:`sarnmt.cli.translate`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.translate import main

    alias("translate", main)
