"""``python -m sarnmt.average``: an alias of ``sarnmt average`` (:mod:`sarnmt.cli.average`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.average import main

    alias("average", main)
