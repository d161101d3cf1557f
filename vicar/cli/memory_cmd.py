"""`vicar memory`: a principal's memory read, checked, repaired, re-embedded, backed up and
restored from the store on disk (no worker needed)."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.table import Table

from vicar.cli.base import console, folded_table, friendly, memory_app
from vicar.display import text
from vicar.errors import BrokenStore, InvalidInput, NotFound, validation_summary
from vicar.memory.names import child_path
from vicar.settings import Settings


@contextmanager
def open_store(principal: str):
    """A principal's record store, read directly (no worker needed); a store that cannot
    be read (junk bytes, corrupt rows) is one line pointing at `vicar memory check`."""
    from vicar.memory.store import RecordStore, RecordsUnusable
    from vicar.models import check_principal

    settings = Settings.from_env()
    path = child_path(settings.principals_dir, check_principal(principal)) / "memory.db"
    if not path.exists():
        raise NotFound(f"no memory for principal {principal!r} under {settings.principals_dir}")

    def broken(exc: BaseException) -> BrokenStore:
        reason = validation_summary(exc) if isinstance(exc, ValidationError) else str(exc)
        return BrokenStore(f"the memory store {path} cannot be read ({reason}); run `vicar memory check {principal}`")

    try:
        store = RecordStore(path)
    except (sqlite3.DatabaseError, RecordsUnusable) as exc:
        raise broken(exc.__cause__ or exc if isinstance(exc, RecordsUnusable) else exc) from None
    try:
        yield store
    except (sqlite3.DatabaseError, ValidationError) as exc:
        raise broken(exc) from None
    finally:
        store.close()


@memory_app.command("stats")
@friendly
def memory_stats(principal: str = typer.Argument(...)) -> None:
    """Size and shape of a principal's memory (reads the store directly)."""
    with open_store(principal) as store:
        table = Table(title=text(f"Memory of {principal}"))
        table.add_column("what")
        table.add_column("value", justify="right")
        rows = {
            "chunks": store.count(),
            "answered by the human": store.count("answered_by = 'human'"),
            "answered by the proxy": store.count("answered_by = 'proxy'"),
            "traces": store.trace_count(),
            "interaction counter N": store.counter(),
            "memory depth (state, task type pairs)": store.memory_depth(),
            "embedding model": store.get_meta("embedding_model") or "",
        }
        for k, v in rows.items():
            table.add_row(k, text(v))
    console.print(table)


@memory_app.command("censors")
@friendly
def memory_censors(
    principal: str = typer.Argument(...),
    show: str = typer.Option(None, "--show", help="One censor, whole: trigger, reason, provenance, counts."),
    disable: str = typer.Option(None, "--disable", help="Stop a censor from firing (kept, and not re-learned)."),
    enable: str = typer.Option(None, "--enable", help="Let a disabled or deactivated censor fire again."),
) -> None:
    """The principal's censors: constraints learned from repeated corrections and rejections."""
    chosen = [o for o in (show, disable, enable) if o is not None]
    if len(chosen) > 1:
        raise InvalidInput("give at most one of --show, --disable, --enable")
    with open_store(principal) as store:
        if disable is not None or enable is not None:
            from vicar.proxy.censors import switched

            cid = disable if disable is not None else enable
            changed = store.update_censor(cid, lambda c: switched(c, enabled=enable is not None))
            if changed is None:
                raise NotFound(f"no censor {cid!r} for principal {principal!r}")
            console.print(text(f"censor {cid}: {changed.status} ({changed.action})"))
            return
        censors = store.censors()
    if show is not None:
        c = next((c for c in censors if c.id == show), None)
        if c is None:
            raise NotFound(f"no censor {show!r} for principal {principal!r}")
        table = Table(title=text(f"Censor {c.id} of {principal}"))
        table.add_column("what")
        table.add_column("value", overflow="fold")
        for k, v in c.model_dump(exclude={"vectors"}).items():
            table.add_row(k, text(", ".join(v) if isinstance(v, list) else v))
        table.add_row("trigger dimensions", text(", ".join(c.vectors)))
        console.print(table)
        return
    if not censors:
        console.print(text(f"No censors learned for {principal} yet."))
        return
    table = folded_table(
        f"Censors of {principal}",
        (
            "id",
            "status",
            "action",
            "severity",
            "pattern",
            "reason",
            "fired",
            "confirmed",
            "false positives",
            "learned at N",
        ),
    )
    for c in censors:
        table.add_row(
            text(c.id),
            c.status,
            c.action,
            f"{c.severity:.2f}",
            text(c.pattern),
            text(c.reason),
            str(c.activations),
            str(c.confirmations),
            str(c.false_positives),
            str(c.created_n),
        )
    console.print(table)


@memory_app.command("reembed")
@friendly
def memory_reembed(
    principal: str = typer.Argument(...),
    to: str = typer.Option(..., "--to", help="minilm | openai"),
) -> None:
    """Re-embed a principal's memory with another model (resumable)."""
    from rich.progress import Progress

    from vicar.memory.embedder import make_embedder
    from vicar.memory.reembed import reembed

    settings = Settings.from_env()
    embedder = make_embedder(to, cache_file=settings.embedding_cache, params=settings.embedder)
    with Progress(console=console) as progress:
        task = progress.add_task(f"re-embedding with {embedder.model_name}", total=None)
        n = reembed(
            settings.principals_dir,
            principal,
            embedder,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
            blended=settings.memory.blended_vectors,
        )
    console.print(
        text(
            f"{principal}: {n} chunks re-embedded with {embedder.model_name}"
            if n
            else f"{principal} already uses {embedder.model_name}"
        )
    )


@memory_app.command("check")
@friendly
def memory_check(principal: str = typer.Argument(...)) -> None:
    """Check a principal's memory on disk: SQLite integrity, schema, records against vectors.
    Read-only (runs beside the worker); exit code 6 when broken."""
    from vicar.memory.check import check, summary

    settings = Settings.from_env()
    report = check(settings.principals_dir, principal, settings.memory.blended_vectors)
    console.print(summary(report), soft_wrap=True, highlight=False, markup=False)
    for problem in report.problems[1:] + ([report.disk_full] if report.problems and report.disk_full else []):
        console.print(f"  also: {problem}", soft_wrap=True, highlight=False, markup=False)
    if report.records_by_dimension:
        console.print(
            "  records/vectors per dimension: "
            + ", ".join(
                f"{d} {n}/{report.vectors_by_dimension.get(d, 0)}"
                for d, n in sorted(report.records_by_dimension.items())
            ),
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    if not report.healthy:
        from vicar.memory.diskfull import DiskFull

        raise typer.Exit(BrokenStore.exit_code if report.problems else DiskFull.exit_code)


@memory_app.command("repair")
@friendly
def memory_repair(principal: str = typer.Argument(...)) -> None:
    """Rebuild a principal's vectors from its records (the source of truth). Refused while a
    worker has the memory open; exit code 6 when the records themselves are broken."""
    from vicar.memory.check import repair
    from vicar.memory.embedder import make_embedder

    settings = Settings.from_env()
    r = repair(
        settings.principals_dir,
        principal,
        make_embedder(cache_file=settings.embedding_cache, params=settings.embedder),
        settings.memory,
    )  # a corrupt memory.db: RecordsUnusable, one line, exit code 6
    console.print(
        f"{principal}: vectors of {r.rebuilt} of {r.chunks} chunks rebuilt"
        + (f"; the unreadable vector store was moved to {r.moved_aside}" if r.moved_aside else "")
        + (
            f"; LOST RECORDS kept as vectors (see `vicar memory check {principal}`): {', '.join(r.lost_records)}"
            if r.lost_records
            else ""
        ),
        soft_wrap=True,
        highlight=False,
        markup=False,
    )


@memory_app.command("backup")
@friendly
def memory_backup(
    principals: Optional[list[str]] = typer.Argument(None, help="Principals to back up."),
    all_: bool = typer.Option(False, "--all", help="Every principal in the data directory."),
    to: Path = typer.Option(..., "--to", help="A new or empty directory for the backup."),
) -> None:
    """Consistent copy of principals' memories (records through SQLite's backup API; vectors
    too when no worker has the memory open). Runs beside a running worker."""
    from vicar.backup import backup

    if bool(principals) == all_:
        raise InvalidInput("name the principals to back up, or give --all")
    manifest = backup(Settings.from_env().principals_dir, principals or None, to)
    for p in manifest.principals:
        console.print(
            text(
                f"{p.principal}: {p.chunks} chunks"
                + ("" if p.vectors else " (records only: the memory is open in a worker; restore rebuilds its vectors)")
            )
        )
    console.print(text(f"backup written to {to}"))


@memory_app.command("restore")
@friendly
def memory_restore(
    source: Path = typer.Argument(..., help="A directory written by `vicar memory backup`."),
    principals: Optional[list[str]] = typer.Argument(None, help="Principals to restore."),
    all_: bool = typer.Option(False, "--all", help="Every principal in the backup."),
    force: bool = typer.Option(False, "--force", help="Move an existing memory aside and restore over it."),
) -> None:
    """Restore principals' memories from a backup; vectors missing from it are rebuilt
    from the records. All or nothing: refused, replacing none, while a worker has any of
    them open."""
    from vicar.backup import restore
    from vicar.memory.check import check, repair
    from vicar.memory.embedder import make_embedder

    if bool(principals) == all_:
        raise InvalidInput("name the principals to restore, or give --all")
    settings = Settings.from_env()

    def rebuild(root: Path, principal: str) -> int:
        if check(root, principal, settings.memory.blended_vectors).healthy:
            return 0
        return repair(
            root,
            principal,
            make_embedder(cache_file=settings.embedding_cache, params=settings.embedder),
            settings.memory,
        ).rebuilt

    for r in restore(source, settings.principals_dir, principals or None, force=force, rebuild=rebuild):
        console.print(
            text(
                f"{r.principal}: {r.chunks} chunks restored"
                + (f", vectors of {r.vectors_rebuilt} rebuilt" if r.vectors_rebuilt else "")
                + (f"; the memory that was there is now {r.replaced}" if r.replaced else "")
            )
        )
