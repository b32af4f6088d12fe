#!/usr/bin/env python3
"""Instructions per call of a toolgate binary serving Streamable HTTP with many calls in flight, counted by callgrind.

The HTTP twin of `callgrind.py` (which drives one call at a time over stdio): `toolgate serve --listen` runs under
`valgrind --tool=callgrind`, in front of `toolgate-bench upstream` over stdio (`--upstream stdio`) or over HTTP
(`--upstream http`, the upstream started natively first and named with `--upstream-url`). The client opens
`--sessions` sessions and keeps `--in-flight` calls in flight in each (one keep-alive connection per call in flight,
as `toolgate-bench`'s `http-sessions` scenario does), makes `--warmup` calls, then the counted calls, and stops
toolgate with SIGTERM (a graceful stop: callgrind writes its totals at exit). It does this once with no counted calls
and once per `--calls` value, and prints (total - baseline) / calls. Valgrind runs one thread at a time, so the
figure counts the work a call costs, not the waiting for a lock; contention shows in the native runs, not here.
It gives every toolgate a fresh state directory in its scratch directory and never touches the user's state.

usage: callgrind_http.py --toolgate PATH --bench PATH [--upstream stdio|http] [--sessions N] [--in-flight N]
                         [--warmup N] [--calls N[,N...]] [--keep DIR] [--no-valgrind]
"""

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import callgrind_runs

TEXT = "x" * 64
PROTOCOL_VERSION = "2025-11-25"
READY_SECONDS = 120


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Connection:
    """One keep-alive connection to the MCP endpoint."""

    def __init__(self, port):
        self.http = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def post(self, message, session=None):
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
        }
        if session:
            headers["Mcp-Session-Id"] = session
        self.http.request("POST", "/mcp", body=json.dumps(message), headers=headers)
        response = self.http.getresponse()
        body = response.read()
        if response.status == 202:
            return None, response.getheader("Mcp-Session-Id")
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {body[:500]!r}")
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            replies = [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]
            reply = next(reply for reply in replies if reply.get("id") == message.get("id"))
        else:
            reply = json.loads(body)
        if "error" in reply:
            raise RuntimeError(f"error reply: {reply}")
        return reply["result"], response.getheader("Mcp-Session-Id")


def open_session(port):
    connection = Connection(port)
    _, session = connection.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
        "clientInfo": {"name": "callgrind_http.py", "version": "0"}}})
    connection.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    name = callgrind_runs.echo_tool(lambda: connection.post(listing, session)[0]["tools"])
    return session, name


def call_many(port, sessions, in_flight, calls):
    """Makes `calls` echo calls spread over every session's `in_flight` connections; returns the seconds taken."""
    workers = [(session, name, slot) for session, name in sessions for slot in range(in_flight)]
    shares = [calls // len(workers) + (1 if index < calls % len(workers) else 0) for index in range(len(workers))]
    failures = []

    def work(session, name, slot, share):
        try:
            connection = Connection(port)
            for number in range(share):
                request_id = 1000 + slot * 10_000_000 + number
                result, _ = connection.post({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                             "params": {"name": name, "arguments": {"text": TEXT}}}, session)
                if result.get("isError") or result["content"][0]["text"] != TEXT:
                    raise RuntimeError(f"wrong echo: {result}")
        except Exception as error:  # reported once all threads are done
            failures.append(error)

    threads = [threading.Thread(target=work, args=(*worker, share)) for worker, share in zip(workers, shares)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} workers failed, first: {failures[0]}")
    return time.monotonic() - started


def wait_listening(child, port):
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"toolgate exited with {child.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("toolgate did not listen in time")


def run_once(args, upstream_url, scratch, calls):
    state = os.path.join(scratch, f"state-{calls}")
    out = os.path.join(scratch, f"callgrind-{args.upstream}-{calls}.out")
    port = free_port()
    command = [args.toolgate, "serve", "--listen", f"127.0.0.1:{port}"]
    command += ["--upstream-url", upstream_url] if upstream_url else ["--", args.bench, "upstream"]
    command = callgrind_runs.under_valgrind(command, out, args.no_valgrind)
    env = dict(os.environ, TOOLGATE_LOG="warn", TOOLGATE_STATE_DIR=state)
    log = open(os.path.join(scratch, f"toolgate-{calls}.log"), "wb")
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    try:
        wait_listening(child, port)
        sessions = [open_session(port) for _ in range(args.sessions)]
        call_many(port, sessions, args.in_flight, args.warmup)
        elapsed = call_many(port, sessions, args.in_flight, calls) if calls else 0.0
        child.send_signal(signal.SIGTERM)
        code = child.wait(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
        log.close()
    if code != 0:
        raise RuntimeError(f"toolgate exited with {code}; see {log.name}")
    return elapsed, None if args.no_valgrind else callgrind_runs.total_instructions(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    callgrind_runs.add_arguments(parser, warmup=512, calls="2048")
    parser.add_argument("--upstream", choices=["stdio", "http"], default="http")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--in-flight", type=int, default=4, help="calls in flight per session")
    args = parser.parse_args()
    counts = callgrind_runs.call_counts(args.calls)
    upstream = None
    with callgrind_runs.scratch_dir(args.keep, "toolgate-callgrind-http-") as scratch:
        try:
            upstream_url = None
            if args.upstream == "http":
                upstream = subprocess.Popen([args.bench, "upstream", "--http", "127.0.0.1:0"], stdout=subprocess.PIPE)
                first = upstream.stdout.readline().decode().strip()
                upstream_url = "http://" + first.removeprefix("listening on ") + "/mcp"
            describe = f"({args.sessions} x {args.in_flight} in flight, {args.upstream} upstream) after {args.warmup} warm-up"
            callgrind_runs.per_call(counts, args.no_valgrind, lambda calls: run_once(args, upstream_url, scratch, calls), describe)
        finally:
            if upstream:
                upstream.terminate()
                upstream.wait()


if __name__ == "__main__":
    sys.exit(main())
