"""`python worker.py` starts Vicar's worker, as in Temporal's samples.

A convenience at the repository's root, not part of the installed package (the
distribution installs only `vicar`): it runs the same entry as `vicar worker` without the
CLI's options, and `python -m vicar.worker`. Settings come from the environment
(docs/configuration.md)."""

from vicar.worker import main

if __name__ == "__main__":
    main()
