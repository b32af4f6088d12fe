"""Drives server-everything through toolgate with the MCP Python SDK and prints what happened as one JSON object.

Usage: everything.py --scenario NAME (--toolgate BIN [--env-json JSON] -- SERVER ARGV | --url URL)

Scenarios (the Rust test asserts on the printed findings):
  list            tools/list: every tool definition as the client received it
  echo            tools/call echo with a message: the result's texts and isError
  elicit-accept   trigger-elicitation-request; the client accepts with content; records the elicitation the
                  client saw and the tool result
  elicit-decline  the same, but the client declines
  progress        trigger-long-running-operation with a progress callback: every progress the client received
  cancel          starts a long operation, cancels it after its first progress (the SDK then sends
                  notifications/cancelled), then checks the session still answers echo and tools/list
  list-changed    gzip-file-as-resource registers a session resource upstream, which makes server-everything send
                  notifications/resources/list_changed; records the notifications the client received and
                  whether a re-list (and a read) shows the new resource
  sampling        trigger-sampling-request; the client's sampling callback answers; records both sides
"""

import base64

import anyio
import mcp.types as types

from relay_common import connect, dump, emit, parse_args, texts

# How long a scenario waits for something the server should do on its own (a guard, not a measurement).
PATIENCE_SECONDS = 60


def add_arguments(parser):
    parser.add_argument("--scenario", required=True)


class Recorder:
    """Collects the notifications the session surfaces, and wakes waiters when one arrives."""

    def __init__(self):
        self.methods = []
        self.changed = anyio.Event()

    async def __call__(self, message):
        method = getattr(message, "method", None)
        if method is None:
            method = f"<{type(message).__name__}: {message}>"
        self.methods.append(method)
        self.changed.set()
        self.changed = anyio.Event()


async def wait_for_tool(session, name):
    """Lists tools until `name` is there: server-everything registers some tools only after initialization and
    announces them with tools/list_changed, so right after connecting they may not be listed yet."""
    with anyio.move_on_after(PATIENCE_SECONDS):
        while True:
            listed = await session.list_tools()
            if any(tool.name == name for tool in listed.tools):
                return True
            await anyio.sleep(0.1)
    return False


async def scenario_list(args):
    async with connect(args) as session:
        listed = await session.list_tools()
        return {"tools": dump(listed.tools), "nextCursor": listed.next_cursor}


async def scenario_echo(args):
    async with connect(args) as session:
        result = await session.call_tool("echo", {"message": "hello through toolgate"})
        return {"texts": texts(result), "isError": bool(result.is_error)}


async def scenario_elicit(args, accept):
    seen = []

    async def on_elicit(context, params):
        seen.append(dump(params))
        if accept:
            return types.ElicitResult(
                action="accept", content={"name": "Ada Lovelace", "check": True, "integer": 7}
            )
        return types.ElicitResult(action="decline")

    async with connect(args, elicitation_callback=on_elicit) as session:
        listed = await wait_for_tool(session, "trigger-elicitation-request")
        result = await session.call_tool("trigger-elicitation-request", {})
        return {"listed": listed, "elicitations": seen, "texts": texts(result), "isError": bool(result.is_error)}


async def scenario_progress(args):
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total})

    async with connect(args) as session:
        result = await session.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 4}, progress_callback=on_progress
        )
        return {"progress": progress, "texts": texts(result), "isError": bool(result.is_error)}


async def scenario_cancel(args):
    progress = []
    first_progress = anyio.Event()

    async def on_progress(value, total, message):
        progress.append(value)
        first_progress.set()

    outcome = {}
    async with connect(args) as session:
        async with anyio.create_task_group() as group:

            async def long_call():
                try:
                    await session.call_tool(
                        "trigger-long-running-operation",
                        {"duration": 20, "steps": 20},
                        progress_callback=on_progress,
                    )
                    outcome["long_call"] = "completed"
                except anyio.get_cancelled_exc_class():
                    outcome["long_call"] = "cancelled"
                    raise

            with anyio.move_on_after(PATIENCE_SECONDS):
                group.start_soon(long_call)
                await first_progress.wait()
            # Cancelling the task group cancels call_tool, which makes the SDK send notifications/cancelled.
            group.cancel_scope.cancel()
        outcome["progress_before_cancel"] = len(progress)
        after = await session.call_tool("echo", {"message": "still alive"})
        outcome["echo_after_cancel"] = texts(after)
        outcome["tools_after_cancel"] = len((await session.list_tools()).tools)
        # A second long call in the same session: its progress reaches this call's callback only.
        progress.clear()
        second = await session.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 2}, progress_callback=on_progress
        )
        outcome["second_call"] = texts(second)
        outcome["second_call_progress"] = list(progress)
    return outcome


async def scenario_list_changed(args):
    recorder = Recorder()
    resource_name = "relay-test.txt.gz"
    uri = f"demo://resource/session/{resource_name}"
    data = "data:text/plain;base64," + base64.b64encode(b"relayed through toolgate\n").decode()
    async with connect(args, message_handler=recorder) as session:
        before = [resource.uri for resource in (await session.list_resources()).resources]
        seen_before_call = list(recorder.methods)
        result = await session.call_tool(
            "gzip-file-as-resource", {"name": resource_name, "data": data, "outputType": "resourceLink"}
        )
        listed_after_notification = False
        with anyio.move_on_after(PATIENCE_SECONDS):
            while not listed_after_notification:
                if "notifications/resources/list_changed" not in recorder.methods[len(seen_before_call):]:
                    await recorder.changed.wait()
                    continue
                after = [resource.uri for resource in (await session.list_resources()).resources]
                listed_after_notification = uri in after
                if not listed_after_notification:
                    await recorder.changed.wait()
        read = None
        if listed_after_notification:
            contents = (await session.read_resource(uri)).contents
            read = [{"uri": str(item.uri), "mimeType": item.mime_type, "hasBlob": bool(getattr(item, "blob", None))}
                    for item in contents]
        return {
            "uri": uri,
            "listed_before": uri in before,
            "call_texts": texts(result),
            "call_content_types": [item.type for item in result.content],
            "notifications": recorder.methods,
            "listed_after_notification": listed_after_notification,
            "read": read,
        }


async def scenario_sampling(args):
    requests = []

    async def on_sample(context, params):
        requests.append(dump(params))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the relay test"),
            model="relay-test-model",
            stop_reason="endTurn",
        )

    async with connect(args, sampling_callback=on_sample) as session:
        listed = await wait_for_tool(session, "trigger-sampling-request")
        result = await session.call_tool("trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20})
        return {"listed": listed, "requests": requests, "texts": texts(result), "isError": bool(result.is_error)}


SCENARIOS = {
    "list": scenario_list,
    "echo": scenario_echo,
    "elicit-accept": lambda args: scenario_elicit(args, accept=True),
    "elicit-decline": lambda args: scenario_elicit(args, accept=False),
    "progress": scenario_progress,
    "cancel": scenario_cancel,
    "list-changed": scenario_list_changed,
    "sampling": scenario_sampling,
}


async def main():
    args = parse_args(add_arguments)
    emit(await SCENARIOS[args.scenario](args))


if __name__ == "__main__":
    anyio.run(main)
