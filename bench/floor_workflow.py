"""The baseline: a workflow that does nothing but, optionally, run no-op local activities,
so its round trip is Temporal's floor for an empty workflow or for the gate's shape.

A module of its own because the workflow sandbox re-imports a workflow's module on
every run: the benchmark script's imports (rich, the worker) would inflate the floor.
"""

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench_noop")
def noop(payload: str) -> str:
    return payload


@workflow.defn(name="BenchFloor")
class FloorWorkflow:
    @workflow.run
    async def run(self, local_activities: int) -> None:
        for _ in range(local_activities):
            await workflow.execute_local_activity(noop, "x", start_to_close_timeout=timedelta(seconds=30))
