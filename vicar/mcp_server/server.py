"""The MCP server: Vicar's gate and AskQuestion as tools any MCP client can call, over
stdio (the client starts `vicar mcp` itself) or streamable HTTP on a loopback address.

Built on the SDK's low-level server so that the tools' input schemas are the pydantic
models' own and every refusal is one line: the SDK's high-level server validates the
arguments itself and answers a bad one with pydantic's multi-line report."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from pydantic import BaseModel
from temporalio.client import Client

from vicar.errors import VicarError
from vicar.mcp_server.gates import AskGate, AskQuestion, GateOutcome, GateTools, PollGate
from vicar.settings import Settings

SERVER_NAME = "vicar"
ASK_GATE, ASK_QUESTION, GATE_STATUS = "ask_approval", "ask_question", "gate_status"
log = logging.getLogger(__name__)

_DESCRIPTIONS = {
    ASK_GATE: (
        "Ask your person to approve an intent, a plan or finished work before you go on. Vicar answers for them "
        "where it has learned to, else the person answers (inbox, phone, chat). Returns the answer if it comes "
        "within wait_seconds, else status 'waiting' and a gate_id for gate_status. Act on `action`: approve: go "
        "on; correct: go on with `text`'s changes; reject or hold: do not."
    ),
    ASK_QUESTION: (
        "Ask your person a question mid-task; the answer is text (`text`). Returns it if it comes within "
        "wait_seconds, else status 'waiting' and a gate_id for gate_status."
    ),
    GATE_STATUS: "The answer to an earlier ask_approval or ask_question by its gate_id, waiting up to wait_seconds.",
}
_INPUTS: dict[str, type[BaseModel]] = {ASK_GATE: AskGate, ASK_QUESTION: AskQuestion, GATE_STATUS: PollGate}


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            description=_DESCRIPTIONS[name],
            input_schema=model.model_json_schema(),
            output_schema=GateOutcome.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=name == GATE_STATUS, open_world_hint=False),
        )
        for name, model in _INPUTS.items()
    ]


def build_server(client: Client, settings: Settings, principal: str) -> Server[Any]:
    tools = GateTools(client, settings, principal)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        try:
            if params.name == GATE_STATUS:
                outcome = await tools.poll(args)
            elif params.name in (ASK_GATE, ASK_QUESTION):
                outcome = await tools.ask(_INPUTS[params.name], args)  # type: ignore[arg-type]
            else:
                return _error(f"no tool {params.name[:100]!r}; the tools: {', '.join(_INPUTS)}")
        except VicarError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001  (one line to the agent; the details to this server's log)
            log.exception("vicar mcp: %s failed", params.name)
            return _error(f"{params.name} failed unexpectedly ({type(exc).__name__}); the server's log has the details")
        data = outcome.model_dump(mode="json")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.model_dump_json(exclude_none=True))],
            structured_content=data,
        )

    return Server(
        SERVER_NAME,
        instructions=f"Ask {principal} (through Vicar) before you act where they would want to be asked.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _error(line: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=line)], is_error=True)


async def serve_stdio(client: Client, settings: Settings, principal: str) -> None:
    from mcp.server.stdio import stdio_server

    server = build_server(client, settings, principal)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


# A tool call's arguments are at most a few hundred kilobytes (the artifact's bound).
MAX_HTTP_BODY = 1 << 20


async def serve_http(client: Client, settings: Settings, principal: str, host: str, port: int) -> None:
    import uvicorn

    server = build_server(client, settings, principal)
    app = server.streamable_http_app(host=host, max_request_body_size=MAX_HTTP_BODY, json_response=True)
    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()
