#!/usr/bin/env python3
"""Rebuilds corpus/grown.jsonl from the published MCP servers named in corpus/manifest.json (or another corpus
file from another manifest: `--manifest corpus/fresh-manifest.json --output corpus/fresh.jsonl`).

It installs each server's pinned package into a scratch directory outside the repository, starts it over stdio
with the dummy credentials the manifest gives, sends `initialize`, `notifications/initialized` and `tools/list`
(following `nextCursor`), keeps the raw replies in the scratch directory, and writes one corpus line per tool that
declares at least one hint. It records what the server says and nothing else: it never fills a missing hint with a
spec default, never judges a declaration, and never reaches a server over the network itself.

It is a maintainer's tool, not a test: it needs the npm and PyPI registries, Node and Python, and it must not run
in CI. The output is deterministic for the same raw replies (sorted by server, then tool name).

Usage (PATH must hold node/npm; `uv` is used for Python servers when it is on PATH, else venv + pip; servers
that need Python 3.13 need it findable, e.g. with PYENV_VERSION=3.13.0 under pyenv):
    python3 corpus/harvest.py install --scratch DIR [--only a,b]
    python3 corpus/harvest.py extract --scratch DIR [--only a,b]
    python3 corpus/harvest.py build   --scratch DIR [--table]
Every step takes `--manifest PATH` (default corpus/manifest.json); `build` takes `--output PATH` (default
corpus/grown.jsonl). One scratch directory can serve several manifests as long as their server ids differ.
"""

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
OUTPUT = HERE / "grown.jsonl"
HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
STANDARD = ["title"] + HINTS
PROTOCOL_VERSION = "2025-06-18"
EXTRACTION = "tools/list of published package"


def load_manifest(path=MANIFEST):
    with open(path, encoding="utf-8") as handle:
        servers = json.load(handle)["servers"]
    names = [server["server"] for server in servers]
    if len(names) != len(set(names)):
        sys.exit("manifest: duplicate server ids")
    return sorted(servers, key=lambda server: server["server"])


def selected(servers, only):
    if not only:
        return servers
    wanted = set(only.split(","))
    unknown = wanted - {server["server"] for server in servers}
    if unknown:
        sys.exit(f"unknown server(s): {', '.join(sorted(unknown))}")
    return [server for server in servers if server["server"] in wanted]


def package_label(server):
    """The `source.package` value: registry, package, version and the flags the server was started with."""
    if server["registry"] == "npm":
        label = f"npm:{server['package']}@{server['version']}"
    else:
        label = f"pypi:{server['package']}=={server['version']}"
    if server.get("flags"):
        label += f" ({server['flags']})"
    return label


def install(server, scratch):
    target = scratch / server["registry"] / server["server"]
    if target.exists():
        return
    target.mkdir(parents=True)
    if server["registry"] == "npm":
        command = ["npm", "install", "--prefix", str(target), "--no-audit", "--no-fund", "--loglevel=error"]
        if server.get("ignore_scripts"):
            command.append("--ignore-scripts")
        command.append(f"{server['package']}@{server['version']}")
        subprocess.run(command, check=True)
        return
    # Extra pins keep an old server importable when a newer SDK release broke it (e.g. `mcp<2`).
    requirements = [f"{server['package']}=={server['version']}"] + server.get("requirements", [])
    # Servers that need a newer Python name it (`"python": "3.13"`); it must be findable by uv or as python3.13.
    python = server.get("python")
    uv = shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", "--python", python or sys.executable, str(target)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", str(target / "bin" / "python")] + requirements, check=True)
    else:
        subprocess.run([f"python{python}" if python else sys.executable, "-m", "venv", str(target)], check=True)
        subprocess.run([str(target / "bin" / "pip"), "install", "-q"] + requirements, check=True)


def command_of(server, scratch, work):
    root = scratch / server["registry"] / server["server"]
    binary = root / ("node_modules/.bin" if server["registry"] == "npm" else "bin") / server["bin"]
    args = [arg.replace("{work}", str(work)) for arg in server.get("args", [])]
    # A bin script without a shebang needs its interpreter named (`"interpreter": "node"`); a wrapper in this
    # directory can stand before the bin (`"node {corpus}/smartbear-explicit.mjs"`).
    interpreter = [part.replace("{corpus}", str(HERE)) for part in server.get("interpreter", "").split()]
    return interpreter + [str(binary)] + args


def expand(value, work):
    """Fills the manifest's placeholders; the dummy key is built here so no key-shaped text sits in the repo."""
    marker = "-----"
    dummy_key = f"{marker}BEGIN PRIVATE KEY{marker}\nZHVtbXk=\n{marker}END PRIVATE KEY{marker}\n"
    return value.replace("{work}", str(work)).replace("{dummy_private_key}", dummy_key)


class Session:
    """A newline-delimited JSON-RPC conversation with one server process over its stdio."""

    def __init__(self, process, deadline):
        self.process = process
        self.deadline = deadline
        self.buffer = b""

    def send(self, message):
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def reply_to(self, request_id):
        while True:
            message = self.next_message()
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
            if "method" in message and "id" in message:
                # The server asks something of the client (roots, ping): answer so it does not stall.
                result = {"roots": []} if message["method"] == "roots/list" else {}
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def next_message(self):
        while True:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    return json.loads(line)
                except ValueError:
                    continue  # a server that logs to stdout: skip the line, as a lenient client would
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no reply before the deadline")
            ready, _, _ = select.select([self.process.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError("server closed stdout")
                self.buffer += chunk


def extract(server, scratch):
    home = scratch / "home" / server["server"]
    work = scratch / "work" / server["server"]
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LANG": "C.UTF-8", "TMPDIR": str(work)}
    env.update({key: expand(value, work) for key, value in server.get("env", {}).items()})
    for step in server.get("setup", []):
        # Local state a server insists on at start (an empty git repository, a file to open), never a network call.
        subprocess.run([arg.replace("{work}", str(work)) for arg in step], check=True, cwd=work, env=env)
    stderr_path = scratch / "raw" / f"{server['server']}.stderr"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            command_of(server, scratch, work),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=work,
            env=env,
        )
        session = Session(process, time.monotonic() + server.get("timeout_s", 90))
        try:
            session.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": PROTOCOL_VERSION,
                        # Declaring what a rich client offers makes servers list the tools they gate on it.
                        "capabilities": {"roots": {"listChanged": False}, "sampling": {}, "elicitation": {}},
                        "clientInfo": {"name": "toolgate-corpus-harvest", "version": "1"},
                    },
                }
            )
            initialized = session.reply_to(1)
            if "error" in initialized:
                raise RuntimeError(f"initialize failed: {initialized['error']}")
            session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools, cursor, request_id = [], None, 2
            while True:
                params = {"cursor": cursor} if cursor else {}
                session.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params})
                listed = session.reply_to(request_id)
                if "error" in listed:
                    raise RuntimeError(f"tools/list failed: {listed['error']}")
                tools += listed["result"].get("tools", [])
                cursor = listed["result"].get("nextCursor")
                request_id += 1
                if not cursor:
                    break
        finally:
            process.kill()
            process.wait()
    raw = {
        "server": server["server"],
        "package": package_label(server),
        "serverInfo": initialized["result"].get("serverInfo"),
        "protocolVersion": initialized["result"].get("protocolVersion"),
        "tools": tools,
    }
    with open(scratch / "raw" / f"{server['server']}.json", "w", encoding="utf-8") as handle:
        json.dump(raw, handle, indent=1, ensure_ascii=False)
    return len(tools)


def entry_of(server, tool):
    """One corpus line, or None when the tool declares no hint. Only keys the server sent count as declared."""
    annotations = tool.get("annotations") or {}
    declared = {key: annotations[key] for key in STANDARD if annotations.get(key) is not None}
    explicit = [key for key in HINTS if key in declared]
    if not explicit:
        return None
    source = {
        "repo": server.get("repo"),
        "path": server.get("path"),
        "commit": server.get("commit"),
        "line": None,
        "package": package_label(server),
        "note": server["note"],
    }
    entry = {
        "server": server["server"],
        "source": source,
        "name": tool["name"],
        "title": tool.get("title"),
        "description": tool.get("description"),
        "input_schema": tool.get("inputSchema"),
        "annotations": declared,
        "explicit_hints": explicit,
        "annotation_origin": server.get("origin", "literal"),
        "extraction": server.get("extraction", EXTRACTION),
    }
    extra = {key: value for key, value in annotations.items() if key not in STANDARD}
    if extra:
        entry["annotations_nonstandard"] = extra
    return entry


def build(servers, scratch, table, output):
    entries, rows = [], []
    for server in servers:
        raw_path = scratch / "raw" / f"{server['server']}.json"
        if server.get("status") == "failed":
            rows.append((server, None, []))
            continue
        if not raw_path.exists():
            sys.exit(f"{server['server']}: no raw tools/list in {raw_path}; run extract first")
        with open(raw_path, encoding="utf-8") as handle:
            tools = json.load(handle)["tools"]
        hinted = [entry for entry in (entry_of(server, tool) for tool in tools) if entry]
        skip = set(server.get("exclude_tools", []))
        hinted = [entry for entry in hinted if entry["name"] not in skip]
        rows.append((server, len(tools), hinted))
        if server.get("status", "entries") == "entries":
            entries += hinted
    entries.sort(key=lambda entry: (entry["server"], entry["name"]))
    with open(output, "w", encoding="utf-8") as handle:
        for entry in entries:
            handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    print(f"wrote {len(entries)} tools from {len({e['server'] for e in entries})} servers to {output.name}")
    if table:
        print_tables(rows, entries)


def print_tables(rows, entries):
    print("\n| server | tools listed | tools kept | package | repository | status |")
    print("|---|---|---|---|---|---|")
    for server, listed, hinted in rows:
        repo = server.get("repo") or "—"
        status = server.get("status", "entries")
        if status == "entries" and not hinted:
            status = "no hints declared"
        listed = "—" if listed is None else listed
        print(f"| {server['server']} | {listed} | {len(hinted)} | `{package_label(server)}` | {repo} | {status} |")
    print("\n| server | tools | ro=T | ro=F | de=T | de=F | idem explicit | ow=T | ow=F | origin |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by_server = {}
    for entry in entries:
        by_server.setdefault(entry["server"], []).append(entry)
    for name, group in sorted(by_server.items()):
        def count(key, value):
            return sum(1 for entry in group if entry["annotations"].get(key) is value)
        idem = sum(1 for entry in group if "idempotentHint" in entry["annotations"])
        print(f"| {name} | {len(group)} | {count('readOnlyHint', True)} | {count('readOnlyHint', False)} | "
              f"{count('destructiveHint', True)} | {count('destructiveHint', False)} | {idem} | "
              f"{count('openWorldHint', True)} | {count('openWorldHint', False)} | {group[0]['annotation_origin']} |")
    print("\ntotals:")
    for key in HINTS:
        true = sum(1 for entry in entries if entry["annotations"].get(key) is True)
        false = sum(1 for entry in entries if entry["annotations"].get(key) is False)
        print(f"  {key}: true {true}, false {false}, absent {len(entries) - true - false}")
    print(f"  annotations.title: {sum(1 for entry in entries if 'title' in entry['annotations'])}")
    print(f"  derived: {sum(1 for entry in entries if entry['annotation_origin'] == 'derived')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["install", "extract", "build"])
    parser.add_argument("--scratch", required=True, type=Path, help="directory outside the repository")
    parser.add_argument("--only", help="comma-separated server ids")
    parser.add_argument("--table", action="store_true", help="print the README tables after build")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="the manifest to read (default manifest.json)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the corpus file build writes (default grown.jsonl)")
    args = parser.parse_args()
    scratch = args.scratch.resolve()
    if HERE.parent in scratch.parents or scratch == HERE.parent:
        sys.exit("the scratch directory must be outside the repository")
    (scratch / "raw").mkdir(parents=True, exist_ok=True)
    servers = selected(load_manifest(args.manifest), args.only)
    if args.step == "build":
        build(servers, scratch, args.table, args.output)
        return
    failures = 0
    for server in servers:
        try:
            if args.step == "install":
                install(server, scratch)
                print(f"{server['server']}: installed", flush=True)
            else:
                print(f"{server['server']}: {extract(server, scratch)} tools", flush=True)
        except (OSError, subprocess.CalledProcessError, TimeoutError, EOFError, RuntimeError) as error:
            failures += 1
            print(f"{server['server']}: FAILED {error}", file=sys.stderr)
    if failures:
        sys.exit(f"{failures} server(s) failed")


if __name__ == "__main__":
    main()
