"""The baseline workflow: does nothing, so its round trip is Temporal's floor.

A module of its own because the workflow sandbox re-imports a workflow's module on
every run: the benchmark script's imports (rich, the worker) would inflate the floor.
"""

from temporalio import workflow


@workflow.defn(name="BenchEmpty")
class EmptyWorkflow:
    @workflow.run
    async def run(self) -> None:
        return None
