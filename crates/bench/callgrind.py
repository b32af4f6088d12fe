#!/usr/bin/env python3
"""Instructions per relayed stdio call of a toolgate binary, counted by valgrind's callgrind.

`toolgate-bench run` reads toolgate's CPU time from /proc in 10 ms ticks, which a shared, busy machine blurs;
instruction counts do not move with load. This script runs `toolgate serve -- <bench> upstream` under
`valgrind --tool=callgrind` (the upstream, an exec'd child, runs natively: callgrind does not trace children),
drives it over stdio with one call in flight (handshake, warm-up calls, then the counted calls), closes stdin and
lets toolgate exit, and reads the total instruction count. It does this once with no counted calls and once per
`--calls` value, and prints (total - baseline) / calls: startup, the handshake, the warm-up and shutdown cancel
out. It only reads the callgrind output files it asked valgrind to write in a scratch directory and gives each
toolgate a fresh state directory there; it never touches the user's state. Under valgrind SHA-256 takes the
software path (no SHA extensions), and the audit writer's 50 ms group-commit window holds fewer rows than at
native speed, so the figures compare binaries with each other, not with a native run.

usage: callgrind.py --toolgate PATH --bench PATH [--warmup N] [--calls N[,N...]] [--keep DIR] [--no-valgrind]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TEXT = "x" * 64


def drive(command, env, warmup, calls):
    """Runs one toolgate, makes warmup + calls echo calls one at a time, and waits for it to exit."""
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    next_id = 0

    def request(method, params=None):
        nonlocal next_id
        next_id += 1
        message = {"jsonrpc": "2.0", "id": next_id, "method": method}
        if params is not None:
            message["params"] = params
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("toolgate closed its stdout: " + child.stderr.read().decode(errors="replace"))
            reply = json.loads(line)
            if reply.get("id") != next_id:
                continue
            if "error" in reply or reply["result"].get("isError"):
                raise RuntimeError(f"error reply: {reply}")
            return reply["result"]

    request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "callgrind.py", "version": "0"}})
    child.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    child.stdin.flush()
    tools = request("tools/list")["tools"]
    name = next(tool["name"] for tool in tools if tool["name"] == "echo" or tool["name"].endswith("_echo"))
    for _ in range(warmup):
        request("tools/call", {"name": name, "arguments": {"text": TEXT}})
    started = time.monotonic()
    for _ in range(calls):
        result = request("tools/call", {"name": name, "arguments": {"text": TEXT}})
        if result["content"][0]["text"] != TEXT:
            raise RuntimeError(f"wrong echo: {result}")
    elapsed = time.monotonic() - started
    child.stdin.close()
    # stderr is drained only at the end: with TOOLGATE_LOG=warn a healthy run writes next to nothing there.
    stderr = child.stderr.read().decode(errors="replace")
    code = child.wait()
    if code != 0:
        raise RuntimeError(f"toolgate exited with {code}: {stderr[-2000:]}")
    return elapsed


def total_instructions(path):
    """The `summary:` (or `totals:`) line of a callgrind output file."""
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            found = re.match(r"^(?:summary|totals):\s+(\d+)", line)
            if found:
                return int(found.group(1))
    raise RuntimeError(f"no totals in {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolgate", required=True)
    parser.add_argument("--bench", required=True, help="the toolgate-bench binary (its `upstream` is the server)")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--calls", default="2000", help="counted calls per run; several values check linearity")
    parser.add_argument("--no-valgrind", action="store_true", help="run natively (a smoke test of the driver)")
    parser.add_argument("--keep", metavar="DIR", help="write the callgrind files here and keep them (for callgrind_annotate)")
    args = parser.parse_args()
    counts = [int(value) for value in args.calls.split(",")]
    scratch = args.keep or tempfile.mkdtemp(prefix="toolgate-callgrind-")
    os.makedirs(scratch, exist_ok=True)
    try:
        totals = {}
        for calls in [0, *counts]:
            state = os.path.join(scratch, f"state-{calls}")
            out = os.path.join(scratch, f"callgrind-{calls}.out")
            env = dict(os.environ, TOOLGATE_LOG="warn", TOOLGATE_STATE_DIR=state)
            command = [args.toolgate, "serve", "--", args.bench, "upstream"]
            if not args.no_valgrind:
                command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]
            elapsed = drive(command, env, args.warmup, calls)
            totals[calls] = None if args.no_valgrind else total_instructions(out)
            print(f"{calls:>6} calls after {args.warmup} warm-up: {elapsed:6.1f} s, Ir {totals[calls]}", flush=True)
        if not args.no_valgrind:
            for calls in counts:
                if calls:
                    per_call = (totals[calls] - totals[0]) / calls
                    print(f"instructions per call ({calls} calls - 0 calls): {per_call:,.0f}")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
