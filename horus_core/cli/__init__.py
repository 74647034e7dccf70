"""``hctl``: the command-line client of the Horus master (entry point :func:`horus_core.cli.main.main`)."""
