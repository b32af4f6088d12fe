"""Shared plumbing for the relay test clients: connect the MCP Python SDK's ClientSession to toolgate.

Each client script takes the same arguments and prints exactly one JSON object on stdout (the scenario's
findings); the Rust tests in crates/cli/tests/relay/ run the scripts and assert on that object.

  --toolgate BIN     the toolgate binary; toolgate runs as `BIN serve -- <server argv>` over stdio
  --env-json JSON    extra environment for toolgate (and so for the upstream it spawns), e.g. PATH
  --serve-args-json JSON  a JSON list of `serve` options put before `--` (policy, state directory)
  --url URL          instead of stdio: connect over Streamable HTTP to a running `toolgate serve --listen`
  SERVER ...         after `--`: the upstream server's argv (stdio only)

Nothing here asserts: a script records what happened, and the Rust test decides whether it is right.
"""

import argparse
import json
import sys
from contextlib import asynccontextmanager

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def parse_args(extra=None):
    """Parses the common arguments; `extra(parser)` may add scenario arguments."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--toolgate", help="the toolgate binary (stdio mode)")
    parser.add_argument("--env-json", default="{}", help="extra environment for toolgate, as a JSON object")
    parser.add_argument("--serve-args-json", default="[]", help="serve options before --, as a JSON list")
    parser.add_argument("--url", help="Streamable HTTP endpoint of a running toolgate")
    if extra is not None:
        extra(parser)
    parser.add_argument("server", nargs="*", help="the upstream server's argv, after --")
    args = parser.parse_args()
    if not args.url and not (args.toolgate and args.server):
        parser.error("give --url, or --toolgate and the server argv after --")
    return args


@asynccontextmanager
async def connect(args, **session_options):
    """An initialized ClientSession talking to toolgate, over stdio or Streamable HTTP."""
    if args.url:
        async with streamable_http_client(args.url) as (read, write):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield session
    else:
        params = StdioServerParameters(
            command=args.toolgate,
            args=["serve", *json.loads(args.serve_args_json), "--", *args.server],
            env=json.loads(args.env_json),
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield session


def dump(model):
    """A pydantic model (or a list of them) as plain JSON data, with wire names."""
    if isinstance(model, list):
        return [dump(item) for item in model]
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def texts(result):
    """The text items of a CallToolResult's content."""
    return [item.text for item in result.content if getattr(item, "type", None) == "text"]


def emit(findings):
    """Prints the scenario's one JSON result object."""
    sys.stdout.write(json.dumps(findings) + "\n")
    sys.stdout.flush()
