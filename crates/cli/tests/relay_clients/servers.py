"""Drives the filesystem, memory and git reference servers through toolgate with the MCP Python SDK, and prints
what happened as one JSON object.

Usage: servers.py --scenario NAME [--dir DIR | --repo REPO] (--toolgate BIN [--env-json JSON] -- ARGV | --url URL)

Scenarios (the Rust test asserts on the printed findings):
  filesystem  (--dir: the server's allowed root) write_file a file, read it back with read_text_file, and record
              the tools' definitions as listed (write_file's emitted hints)
  memory      create_entities two entities, then read_graph; records both results' structured content and texts
  git         (--repo: a repository with one commit) git_status and git_log; records their texts
"""

import os

import anyio

from relay_common import connect, dump, emit, parse_args, texts


def add_arguments(parser):
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--dir", help="filesystem: the allowed root")
    parser.add_argument("--repo", help="git: the repository")


def call_findings(result):
    return {
        "texts": texts(result),
        "structured": result.structured_content,
        "isError": bool(result.is_error),
    }


async def scenario_filesystem(args):
    path = os.path.join(args.dir, "through-toolgate.txt")
    content = "written through toolgate\nsecond line\n"
    async with connect(args) as session:
        tools = dump((await session.list_tools()).tools)
        written = await session.call_tool("write_file", {"path": path, "content": content})
        read = await session.call_tool("read_text_file", {"path": path})
        return {
            "path": path,
            "content": content,
            "tools": {tool["name"]: tool for tool in tools},
            "write": call_findings(written),
            "read": call_findings(read),
        }


async def scenario_memory(args):
    entities = [
        {"name": "toolgate", "entityType": "project", "observations": ["relays MCP", "rewrites annotations"]},
        {"name": "relay-test", "entityType": "test", "observations": ["runs the Python SDK"]},
    ]
    async with connect(args) as session:
        created = await session.call_tool("create_entities", {"entities": entities})
        graph = await session.call_tool("read_graph", {})
        return {"entities": entities, "create": call_findings(created), "graph": call_findings(graph)}


async def scenario_git(args):
    async with connect(args) as session:
        status = await session.call_tool("git_status", {"repo_path": args.repo})
        log = await session.call_tool("git_log", {"repo_path": args.repo, "max_count": 5})
        return {"status": call_findings(status), "log": call_findings(log)}


SCENARIOS = {"filesystem": scenario_filesystem, "memory": scenario_memory, "git": scenario_git}


async def main():
    args = parse_args(add_arguments)
    emit(await SCENARIOS[args.scenario](args))


if __name__ == "__main__":
    anyio.run(main)
