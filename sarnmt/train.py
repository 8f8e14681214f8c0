"""``python -m sarnmt.train``: an alias of ``sarnmt train`` (:mod:`sarnmt.cli.train`)."""

if __name__ == "__main__":
    from sarnmt.cli import alias
    from sarnmt.cli.train import main

    alias("train", main)
