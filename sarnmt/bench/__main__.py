"""``python -m sarnmt.bench``: an alias of ``sarnmt bench`` (:mod:`sarnmt.cli.bench`), kept for scripts; it runs the
command-line program by name (:func:`sarnmt.utils.hydra_app.run_alias`), as the ``sarnmt`` script does, so that
nothing in :mod:`sarnmt.bench`, below the commands' floor, imports :mod:`sarnmt.cli`."""

if __name__ == "__main__":
    from sarnmt.utils.hydra_app import run_alias

    run_alias()
