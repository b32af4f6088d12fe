"""A guardrail test client: the MCP Python SDK's ClientSession calls the demo's destructive `delete_note` through
`toolgate serve` (standard policy, so the call needs a person) and then reads the note back with `get_note`.

  --url URL          Streamable HTTP endpoint of a running `toolgate serve`
  --scenario S       accept: the client declares elicitation and accepts with {"approve": true}
                     decline: the client declares elicitation and declines
                     queue: the client declares no elicitation (the call waits for `toolgate approvals`)
  --note N           the note id to delete

Prints one JSON object: the elicitation requests seen, the delete result and the get_note result afterwards.
Nothing here asserts: the Rust test in crates/cli/tests/guardrails/python.rs decides whether it is right.
"""

import argparse
import json
import sys

import anyio
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def summary(result):
    return {
        "isError": bool(result.is_error),
        "texts": [item.text for item in result.content if getattr(item, "type", None) == "text"],
    }


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--scenario", choices=["accept", "decline", "queue"], required=True)
    parser.add_argument("--note", type=int, required=True)
    args = parser.parse_args()
    seen = []

    async def on_elicit(context, params):
        seen.append({"message": params.message, "requestedSchema": params.requested_schema})
        if args.scenario == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    options = {} if args.scenario == "queue" else {"elicitation_callback": on_elicit}
    async with streamable_http_client(args.url) as (read, write):
        async with ClientSession(read, write, **options) as session:
            await session.initialize()
            deleted = await session.call_tool("delete_note", {"id": args.note})
            after = await session.call_tool("get_note", {"id": args.note})
    sys.stdout.write(json.dumps({"elicitations": seen, "delete": summary(deleted), "after": summary(after)}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
