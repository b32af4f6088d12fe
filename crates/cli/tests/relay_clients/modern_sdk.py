"""Drives one upstream through toolgate with the MCP Python SDK 2.3 `Client` (the high-level client that probes
`server/discover` in auto mode) and prints what happened as one JSON object.

Usage: modern_sdk.py --mode MODE --profile PROFILE [--scenario tour|bridge]
                     (--toolgate BIN [--env-json JSON] [--serve-args-json JSON] -- | --url URL)

  --mode       auto (discover, fall back to initialize), 2026-07-28 (pinned: no probe, no handshake) or legacy
               (the initialize handshake, 2025-11-25)
  --profile    everything (server-everything's tools and resources) or modern (fixtures/modern.py's)
  --scenario   tour: on one connection, in order: list tools, read a resource, call a tool, a confirmation the
               client accepts, the same confirmation declined (toolgate's config puts the `confirm` tool to a
               person), progress, and a call cancelled after its first progress followed by a plain call;
               then, for the modern profile in legacy mode, `ask_name` (the upstream's own question, which
               toolgate turns into a pushed elicitation)
               bridge: server-everything's `trigger-elicitation-request` answered by the elicitation callback
  Over stdio the upstream comes from toolgate's config (in --serve-args-json), so nothing follows `--`.

Every wait is bounded (PATIENCE_SECONDS per step; the Rust test guards the whole run too), so a toolgate that never
answers fails the run instead of hanging it. Nothing here asserts: the Rust test in crates/cli/tests/relay/
modern_sdk.rs decides whether the findings are right, together with toolgate's audit of the same run.
"""

import argparse
import json
import sys

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters

# How long one step may take before the run fails (a guard, not a measurement).
PATIENCE_SECONDS = 60

PROFILES = {
    "everything": {
        "resource": "demo://resource/static/document/architecture.md",
        "call": ("echo", {"message": "hello through toolgate"}),
        "confirm": ("get-sum", {"a": 1, "b": 2}),
        "progress": ("trigger-long-running-operation", {"duration": 1, "steps": 3}),
        "cancel": ("trigger-long-running-operation", {"duration": 30, "steps": 30}),
    },
    "modern": {
        "resource": "note://first",
        "call": ("read_note", {"name": "first"}),
        "confirm": ("erase_note", {"name": "first"}),
        "progress": ("count_slowly", {"steps": 3}),
        "cancel": ("wait_for_cancel", {}),
    },
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--toolgate", help="the toolgate binary (stdio)")
    parser.add_argument("--env-json", default="{}", help="extra environment for toolgate, as a JSON object")
    parser.add_argument("--serve-args-json", default="[]", help="serve options, as a JSON list")
    parser.add_argument("--url", help="Streamable HTTP endpoint of a running toolgate")
    parser.add_argument("--mode", required=True)
    parser.add_argument("--profile", choices=sorted(PROFILES), required=True)
    parser.add_argument("--scenario", choices=["tour", "bridge"], default="tour")
    parser.add_argument("server", nargs="*", help="ignored: the upstream comes from toolgate's config")
    args = parser.parse_args()
    if not args.url and not args.toolgate:
        parser.error("give --url, or --toolgate")
    return args


def target(args):
    if args.url:
        return args.url
    return StdioServerParameters(
        command=args.toolgate,
        args=["serve", *json.loads(args.serve_args_json)],
        env=json.loads(args.env_json),
    )


def texts(result):
    return [item.text for item in result.content if getattr(item, "type", None) == "text"]


def summary(result):
    return {"texts": texts(result), "isError": bool(result.is_error)}


class Person:
    """The elicitation callback: answers every question with the current `answer` and keeps what it was asked."""

    def __init__(self):
        self.answer = "accept"
        self.content = {"approve": True}
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append({"message": params.message, "schema": getattr(params, "requested_schema", None)})
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content=self.content)
        return types.ElicitResult(action=self.answer)

    def take(self):
        asked, self.asked = self.asked, []
        return asked


async def confirmation(client, person, answer, tool, arguments):
    person.answer = answer
    with anyio.fail_after(PATIENCE_SECONDS):
        result = await client.call_tool(tool, arguments)
    return {**summary(result), "asked": person.take()}


async def progress_of(client, tool, arguments):
    values = []

    async def on_progress(value, total, message):
        values.append(value)

    with anyio.fail_after(PATIENCE_SECONDS):
        result = await client.call_tool(tool, arguments, progress_callback=on_progress)
    return {**summary(result), "progress": values}


async def cancelled_call(client, tool, arguments):
    """Starts the call, cancels it once its first progress arrived (the SDK closes the request's stream over HTTP
    and sends notifications/cancelled over stdio), and reports how the call ended on the client's side."""
    first_progress = anyio.Event()
    outcome = {"progress_before_cancel": 0, "call": "not started"}

    async def on_progress(value, total, message):
        outcome["progress_before_cancel"] += 1
        first_progress.set()

    async def call():
        outcome["call"] = "running"
        try:
            await client.call_tool(tool, arguments, progress_callback=on_progress)
            outcome["call"] = "completed"
        except anyio.get_cancelled_exc_class():
            outcome["call"] = "cancelled"
            raise

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        with anyio.move_on_after(PATIENCE_SECONDS):
            await first_progress.wait()
        group.cancel_scope.cancel()
    return outcome


async def tour(args, client, person):
    profile = PROFILES[args.profile]
    findings = {"protocolVersion": client.protocol_version}
    with anyio.fail_after(PATIENCE_SECONDS):
        listed = await client.list_tools()
    findings["tools"] = sorted(tool.name for tool in listed.tools)
    with anyio.fail_after(PATIENCE_SECONDS):
        read = await client.read_resource(profile["resource"])
    findings["read"] = [getattr(item, "text", None) for item in read.contents]
    tool, arguments = profile["call"]
    with anyio.fail_after(PATIENCE_SECONDS):
        findings["call"] = summary(await client.call_tool(tool, arguments))
    tool, arguments = profile["confirm"]
    findings["accepted"] = await confirmation(client, person, "accept", tool, arguments)
    findings["declined"] = await confirmation(client, person, "decline", tool, arguments)
    findings["progress"] = await progress_of(client, *profile["progress"])
    findings["cancel"] = await cancelled_call(client, *profile["cancel"])
    tool, arguments = profile["call"]
    with anyio.fail_after(PATIENCE_SECONDS):
        findings["after_cancel"] = summary(await client.call_tool(tool, arguments))
    if args.profile == "modern" and args.mode == "legacy":
        person.content = {"name": "Ada"}
        findings["ask_name"] = await confirmation(client, person, "accept", "ask_name", {})
    return findings


async def bridge(args, client, person):
    findings = {"protocolVersion": client.protocol_version}
    person.content = {"name": "Ada Lovelace", "check": True, "integer": 7}
    # server-everything registers its elicitation tool once it has seen the client's capabilities.
    with anyio.fail_after(PATIENCE_SECONDS):
        while True:
            listed = await client.list_tools(cache_mode="bypass")
            if any(tool.name == "trigger-elicitation-request" for tool in listed.tools):
                break
            await anyio.sleep(0.1)
    findings["accepted"] = await confirmation(client, person, "accept", "trigger-elicitation-request", {})
    findings["declined"] = await confirmation(client, person, "decline", "trigger-elicitation-request", {})
    return findings


async def main():
    args = parse_args()
    person = Person()
    # No response cache: every step must reach toolgate, so its audit sees each one.
    client = Client(target(args), mode=args.mode, elicitation_callback=person, cache=None)
    # Connecting is bounded by the Rust test's hang guard: a cancel scope around `async with` would have to close
    # before the transport's task groups inside it, which anyio refuses.
    async with client:
        findings = await (tour if args.scenario == "tour" else bridge)(args, client, person)
    sys.stdout.write(json.dumps(findings) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
