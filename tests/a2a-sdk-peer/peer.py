"""An A2A 1.0 peer built only from the official A2A SDK (PyPI `a2a-sdk` 1.x), for Reach's
interop test (issue #33 item 9, `tests/tests/a2a_sdk.rs`).

Everything that speaks A2A is the SDK's own: `DefaultRequestHandler` (its v2 handler),
`InMemoryTaskStore`, `create_jsonrpc_routes`, `TaskUpdater`. This file only supplies what an
agent author supplies: an `AgentExecutor` and an agent card. The executor reads the first word
of the user's text (a trailing colon dropped) as the script:

- `completed`: submitted, then an artifact and COMPLETED;
- `working`: submitted, WORKING for `--working-secs`, then an artifact and COMPLETED;
- `failed`, `rejected`: FAILED / REJECTED with a status message saying why;
- `input`: INPUT_REQUIRED with a status message; the SDK's CancelTask calls `cancel`, which
  publishes CANCELED.

It serves HTTPS on 127.0.0.1 (uvicorn, the certificate and key given) on a port it binds
itself and prints as `port <n>`, then one line `request <json>` per request received (its
JSON-RPC method and A2A-Version header), so the test asserts what the peer saw. Run with the
venv that `scripts/setup-test-host.sh` installs (`/var/tmp/reach-venvs/a2a`).
"""

import argparse
import asyncio
import json
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)

PATH = "/a2a"


def say(line):
    print(line, flush=True)


class ScriptedExecutor(AgentExecutor):
    def __init__(self, working_secs):
        self.working_secs = working_secs

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        words = text.split()
        script = words[0].rstrip(":") if words else ""
        task = context.current_task or new_task(
            context.task_id,
            context.context_id,
            TaskState.TASK_STATE_SUBMITTED,
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        why = lambda words: updater.new_agent_message([new_text_part(words)])
        if script == "working":
            await updater.start_work()
            await asyncio.sleep(self.working_secs)
        if script in ("completed", "working"):
            await updater.add_artifact([new_text_part(f"sdk answer to: {text}")], name="answer")
            await updater.complete()
        elif script == "failed":
            await updater.failed(why("The SDK peer failed on purpose: no index."))
        elif script == "rejected":
            await updater.reject(why("The SDK peer rejects this request."))
        elif script == "input":
            await updater.requires_input(why("Which corpus do you mean?"))
        else:
            await updater.reject(why(f"unknown script {script!r}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


class Recorder:
    """ASGI middleware: prints each request's JSON-RPC method and A2A-Version, then hands the
    unchanged body to the SDK's app."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        say("request " + json.dumps({
            "path": scope["path"],
            "method": method,
            "a2a_version": headers.get("a2a-version"),
        }))
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--host-name", required=True)
    ap.add_argument("--working-secs", type=float, default=1.0)
    args = ap.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    url = f"https://{args.host_name}:{port}{PATH}"
    card = AgentCard(
        name="reach-interop-sdk-peer",
        description="A2A SDK peer for Reach's interop test",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=False, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="scripted", name="scripted", description="scripted outcomes", tags=["test"])
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(args.working_secs),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )
    app = Recorder(Starlette(routes=create_jsonrpc_routes(handler, PATH)))
    config = uvicorn.Config(
        app,
        ssl_certfile=args.cert,
        ssl_keyfile=args.key,
        log_level="warning",
        lifespan="off",
    )
    say(f"port {port}")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
