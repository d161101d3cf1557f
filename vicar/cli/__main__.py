"""`python -m vicar.cli`: the same as the `vicar` command."""

from vicar.cli import main

if __name__ == "__main__":
    main()
