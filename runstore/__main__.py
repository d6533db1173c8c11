"""`python -m runstore` is the `runstore` command."""

from .cli import main

main()
