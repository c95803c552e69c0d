"""`python -m specgen` is the `specgen` command."""

from specgen.cli import main

main()
