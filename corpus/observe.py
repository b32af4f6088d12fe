#!/usr/bin/env python3
"""Records what corpus servers' tools do under `toolgate verify`, as evidence from behaviour for the eval.

For each selected server of `manifest.json` (installed by `harvest.py install`, or found among the test peers), this
runs `toolgate verify --allow-writes --format json --calls 2 --no-record` in a fresh work directory and writes
`observations/<server>.json`: the verify JSON with the package, version, command, flags, toolgate commit and date.
Machine paths are replaced by placeholders (`{install}` for the server's install root, `{peers}` for the test peers,
`{scratch}` for verify's scratch copy, `{home}`) and the file is refused if any remains. It never installs anything
itself, never runs a server outside verify's sandbox, and writes only `observations/`. Not run in CI (it needs the
installs, bubblewrap and strace); `cargo xtask eval --observations corpus/observations` weighs what it wrote.

    export PATH=<node 22>/bin:$PATH
    python3 corpus/harvest.py install --scratch /tmp/scratch --only server-time,...
    python3 corpus/observe.py --scratch /tmp/scratch --toolgate target/debug/toolgate --only server-time,...
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harvest  # noqa: E402

FLAGS = ["--allow-writes", "--format", "json", "--calls", "2", "--timeout-per-call", "60", "--timeout", "420",
         "--no-record"]

# What a server needs beyond the manifest to run inside the scratch copy: its data under the copy (`{scratch}`), a
# work directory set up as the tools expect (a git repository, a vault). `{work}` in the manifest's arguments is the
# copy itself, the server's working directory.
EXTRA = {
    "server-git": {"setup": "git"},
    "cyanheads-git": {"setup": "git", "env": {"GIT_BASE_DIR": "{scratch}"}},
    "server-memory": {"env": {"MEMORY_FILE_PATH": "{scratch}/memory.jsonl"}},
    # The vault must be named by an absolute path, known only inside the sandbox: a shell names the copy.
    "obsidian-mcp": {"setup": "vault", "shell": 'exec "$0" serve --vault "notes=$PWD"'},
    # Starts slowly under strace (a minute or more before it answers `initialize`).
    "basic-memory": {"env": {"HOME": "{scratch}", "BASIC_MEMORY_HOME": "{scratch}/basic-memory"},
                     "timeout_per_call": "180"},
    # The manifest's dummy backend (port 9) is one of the ports fetch refuses before connecting ("bad port"), so a
    # Node server would fail its calls without trying the network; another closed port lets it try (and fail).
    "coolify": {"env": {"COOLIFY_BASE_URL": "http://127.0.0.1:8"}},
    # Creates its index under HOME at start: inside the copy, so the server starts (the writes are then evidence).
    "jcodemunch": {"env": {"HOME": "{scratch}"}},
}


def setup_work(kind, work):
    (work / "notes.md").write_text("# Notes\n\nA note for the tools to read.\n")
    if kind == "git":
        env = dict(os.environ, GIT_AUTHOR_NAME="verify", GIT_AUTHOR_EMAIL="verify@example.invalid",
                   GIT_COMMITTER_NAME="verify", GIT_COMMITTER_EMAIL="verify@example.invalid")
        for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
            subprocess.run(["git", "-C", str(work)] + command, check=True, env=env)
    if kind == "vault":
        (work / ".obsidian").mkdir()


def locate(server, scratch, peers):
    """The server's install root and command: the scratch install, else the test peers (the reference servers)."""
    command = harvest.command_of(server, scratch, Path("."))
    binary = Path(command[-1 - len(server.get("args", []))])
    if binary.exists():
        return scratch / server["registry"] / server["server"], command
    root = peers / ("node" if server["registry"] == "npm" else "venv")
    sub = "node_modules/.bin" if server["registry"] == "npm" else "bin"
    return root, [str(root / sub / server["bin"])] + [a.replace("{work}", ".") for a in server.get("args", [])]


def placeholders(text, replacements):
    for old, new in replacements:
        text = text.replace(old, new)
    text = re.sub(r"/tmp/toolgate-verify-[A-Za-z0-9]+/work", "{scratch}", text)
    return re.sub(r"/tmp/toolgate-verify-[A-Za-z0-9]+", "{verify}", text)


def observe(server, scratch, peers, toolgate, out):
    root, command = locate(server, scratch, peers)
    command = [part.replace("{work}", ".") for part in command]
    extra = EXTRA.get(server["server"], {})
    if extra.get("shell"):
        command = ["/bin/sh", "-c", extra["shell"], command[0]]
    env = {key: value.replace("{work}", "{scratch}") for key, value in server.get("env", {}).items()}
    env = {key: harvest.expand(value, "{scratch}") for key, value in env.items()}
    env.update(extra.get("env", {}))
    with tempfile.TemporaryDirectory(prefix="observe-") as work:
        work = Path(work)
        setup_work(extra.get("setup"), work)
        flags = list(FLAGS)
        if extra.get("timeout_per_call"):
            flags[flags.index("--timeout-per-call") + 1] = extra["timeout_per_call"]
        argv = [toolgate, "verify", *flags, "--dir", str(work)]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        argv += ["--", *command]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        replacements = [(str(root), "{install}"), (str(peers), "{peers}"), (str(work), "{work}"),
                        (os.path.expanduser("~"), "{home}")]
        if run.returncode not in (0, 1):
            print(f"{server['server']}: verify exited {run.returncode}: {run.stderr.strip()[-800:]}", file=sys.stderr)
            return {"server": server["server"], "exit": run.returncode,
                    "error": placeholders(run.stderr.strip()[-800:], replacements)}
        verification = json.loads(placeholders(run.stdout, replacements))
    commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    record = {
        "server": server["server"],
        "package": harvest.package_label(server),
        "command": [placeholders(part, [(str(root), "{install}"), (str(peers), "{peers}")]) for part in command],
        "env": env,
        "flags": flags,
        "toolgate": commit,
        "date": datetime.date.today().isoformat(),
        "exit": run.returncode,
        "verification": verification,
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    # A path the server chose itself (`/tmp/cache`) is evidence; the paths of this machine's installs, home and
    # scratch directories are not, and must not reach the repository.
    markers = ("/tmp/toolgate-verify-", "/tmp/observe-", "/root/", "/home/", "/work/", str(scratch), str(peers))
    for marker in markers:
        if marker in text:
            raise SystemExit(f"{server['server']}: a machine path ({marker}) is left in the recording")
    (out / f"{server['server']}.json").write_text(text)
    tools = verification["tools"]
    called = [tool for tool in tools if tool.get("observations")]
    print(f"{server['server']}: {len(tools)} tools, {len(called)} called, "
          f"{sum(1 for tool in called if tool['observed']['succeeded'] == 0)} failed every call, "
          f"{sum(1 for tool in called if tool['observed']['supported'])} supported")
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scratch", required=True, type=Path, help="harvest.py's install directory")
    parser.add_argument("--peers", type=Path, default=Path(os.environ.get("TOOLGATE_PEERS_DIR", ".cache/peers")))
    parser.add_argument("--toolgate", required=True, help="the toolgate binary")
    parser.add_argument("--only", required=True, help="comma-separated server ids")
    args = parser.parse_args()
    out = HERE / "observations"
    out.mkdir(exist_ok=True)
    failures = []
    for server in harvest.selected(harvest.load_manifest(), args.only):
        failure = observe(server, args.scratch.resolve(), args.peers.resolve(), os.path.abspath(args.toolgate), out)
        if failure:
            failures.append(failure)
    for failure in failures:
        print(json.dumps(failure), file=sys.stderr)


if __name__ == "__main__":
    main()
