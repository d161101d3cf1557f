"""Bytecode for the workflow sandbox.

The sandbox imports a workflow's module afresh for every workflow run. With no bytecode
to read (PYTHONDONTWRITEBYTECODE=1, set in this project's container image and in many
others) each gate compiled workflows/gate.py from source again: measured with py-spy,
about a tenth of the worker's CPU under load. So the worker compiles this package once
at start (the workflows package); when the interpreter writes no bytecode itself, into a cache under the data
directory (sys.pycache_prefix), never into the source tree.
"""

from __future__ import annotations

import importlib.util
import logging
import py_compile
import sys
from pathlib import Path

log = logging.getLogger(__name__)


def compile_package(package_dir: Path, cache_dir: Path) -> int:
    """Compile a package's modules where the import system will look for them.
    Returns how many were compiled; an unwritable cache only costs speed."""
    if not sys.dont_write_bytecode:
        return 0  # the import system writes and reads __pycache__ itself
    sources = sorted(package_dir.rglob("*.py"))  # its subpackages too (workflows/gate/)
    if all(_fresh(src) for src in sources):
        return 0  # compiled when installed (pip does, the container image's included)
    if sys.pycache_prefix is None:
        sys.pycache_prefix = str(cache_dir)
    done = 0
    for src in sources:
        try:
            py_compile.compile(
                str(src),
                cfile=importlib.util.cache_from_source(str(src)),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
            )
            done += 1
        except (OSError, py_compile.PyCompileError) as exc:
            log.warning("no bytecode for %s (each workflow run compiles it): %s", src.name, exc)
    return done


def _fresh(src: Path) -> bool:
    """A bytecode file the import system will take for `src` (same mtime and size in its header)."""
    try:
        data = Path(importlib.util.cache_from_source(str(src))).read_bytes()[:16]
        stat = src.stat()
    except OSError:
        return False
    return (
        len(data) == 16
        and data[:4] == importlib.util.MAGIC_NUMBER
        and int.from_bytes(data[4:8], "little") == 0
        and int.from_bytes(data[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(data[12:16], "little") == stat.st_size & 0xFFFFFFFF
    )
