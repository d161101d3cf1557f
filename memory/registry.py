"""The worker's open memories, one per principal (`MemoryRegistry`), and how they are
opened and closed out of reach of a cancelled activity."""

from __future__ import annotations

import _thread
import os
import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from vicar.memory.names import check_principal
from vicar.memory.params import MemoryParams

if TYPE_CHECKING:
    from vicar.memory.principal import PrincipalMemory


class _Job:
    """One open or close, run on a thread of its own (see MemoryRegistry)."""

    def __init__(self, step, principal: str) -> None:
        self.step, self.principal = step, principal
        self.result: PrincipalMemory | None = None
        self.error: BaseException | None = None
        self.finished = _thread.allocate_lock()
        self.finished.acquire()

    def run(self) -> None:
        try:
            self.result = self.step(self.principal)
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished.release()

    def wait(self) -> PrincipalMemory | None:
        while not self.finished.acquire(timeout=JOB_WAIT_SLICE):
            pass  # in slices, so the caller's own cancellation is raised while it waits
        if self.error is not None:
            raise self.error
        return self.result


# Seconds a caller waits between checks for its cancellation while a memory opens.
JOB_WAIT_SLICE = 0.1


def _start_jobs(jobs: queue.SimpleQueue) -> None:
    """The registry's dispatcher: each job on a new thread, until told to stop (None)."""
    while (job := jobs.get()) is not None:
        threading.Thread(target=job.run, name=f"vicar-memory-{job.principal}", daemon=True).start()


class MemoryRegistry:
    """The worker's open memories, one per principal, opened on first use.

    Opening and closing run on threads of their own, never in the caller's. Temporal
    cancels a sync activity by raising CancelledError into its thread at whatever line
    it has reached: an open or close cut there kept the owner lock (the worker then
    refused the principal as in use, by itself, for as long as it ran) or failed as a
    broken vector store. Here they always finish, and the memory an open leaves is
    registered whatever became of its caller, whose cancellation ends only its wait.
    The caller only queues the job and waits on a lock, both single C calls: those
    threads are started by the registry's own dispatcher, since a thread started from
    the cancelled one can receive its cancellation (CPython 3.11 gives a new thread its
    starter's id until it runs) and threading.Thread.start waits on a Condition that a
    cancellation can cut."""

    def __init__(self, root: Path, embedder_factory, params: MemoryParams) -> None:
        self.root = root
        self._embedder_factory = embedder_factory
        self.params = params
        self._open: dict[str, PrincipalMemory] = {}
        self._opening: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._start_dispatcher()

    def _start_dispatcher(self) -> None:
        self._pid = os.getpid()
        threading.Thread(target=_start_jobs, args=(self._jobs,), name="vicar-memory-jobs", daemon=True).start()

    def __del__(self) -> None:
        jobs = getattr(self, "_jobs", None)
        if jobs is not None:
            jobs.put(None)  # the dispatcher ends with its registry

    def get(self, principal: str) -> PrincipalMemory:
        check_principal(principal)
        mem = self._open.get(principal)  # one dict read: atomic, no lock a cancellation could cut
        if mem is not None:
            return mem
        mem = self._by_own_thread(self._open_one, principal)
        assert mem is not None  # _open_one returns the memory or raises
        return mem

    def release(self, principal: str) -> None:
        """Close one principal's memory (its files are about to move); the next `get`
        opens it again from disk."""
        check_principal(principal)
        self._by_own_thread(self._release_one, principal)

    def close(self) -> None:
        """Close every open memory (the registry stays usable: a later `get` opens again)."""
        with self._lock:
            mems = list(self._open.values())
            self._open.clear()
        for mem in mems:
            mem.close()

    def _by_own_thread(self, step, principal: str) -> PrincipalMemory | None:
        if self._pid != os.getpid():
            self._start_dispatcher()  # forked: threads do not follow a fork
        job = _Job(step, principal)
        self._jobs.put(job)
        return job.wait()

    def _serialized(self, principal: str) -> threading.Lock:
        with self._lock:
            return self._opening.setdefault(principal, threading.Lock())

    def _open_one(self, principal: str) -> PrincipalMemory:
        # Opening (index rebuild) can take seconds: one principal's opening must not
        # hold up the others' gates, so the lock is per principal.
        with self._serialized(principal):
            mem = self._open.get(principal)
            if mem is None:
                from vicar.memory.principal import PrincipalMemory  # it imports this module

                mem = PrincipalMemory(principal, self.root, self._embedder_factory(), self.params)
                with self._lock:
                    self._open[principal] = mem
            return mem

    def _release_one(self, principal: str) -> None:
        with self._serialized(principal):
            with self._lock:
                mem = self._open.pop(principal, None)
            if mem is not None:
                mem.close()
