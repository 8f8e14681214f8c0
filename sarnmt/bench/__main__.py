"""``python -m sarnmt.bench``: an alias of ``sarnmt bench`` (:mod:`sarnmt.cli.bench`), kept for scripts. An entry
point run as ``__main__``, never imported: it finds the dispatcher by name at run time, as the ``sarnmt`` script does,
so that nothing in :mod:`sarnmt.bench`, below the commands' floor, imports :mod:`sarnmt.cli`."""

if __name__ == "__main__":
    from importlib import import_module

    import_module("sarnmt.cli").alias("bench")
