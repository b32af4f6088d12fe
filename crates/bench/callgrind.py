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
import subprocess
import sys
import time

import callgrind_runs

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
    name = callgrind_runs.echo_tool(lambda: request("tools/list")["tools"])
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    callgrind_runs.add_arguments(parser, warmup=200, calls="2000")
    args = parser.parse_args()
    counts = callgrind_runs.call_counts(args.calls)
    with callgrind_runs.scratch_dir(args.keep, "toolgate-callgrind-") as scratch:

        def run(calls):
            state = os.path.join(scratch, f"state-{calls}")
            out = os.path.join(scratch, f"callgrind-{calls}.out")
            env = dict(os.environ, TOOLGATE_LOG="warn", TOOLGATE_STATE_DIR=state)
            command = [args.toolgate, "serve", "--", args.bench, "upstream"]
            elapsed = drive(callgrind_runs.under_valgrind(command, out, args.no_valgrind), env, args.warmup, calls)
            return elapsed, None if args.no_valgrind else callgrind_runs.total_instructions(out)

        callgrind_runs.per_call(counts, args.no_valgrind, run, f"after {args.warmup} warm-up")


if __name__ == "__main__":
    sys.exit(main())
