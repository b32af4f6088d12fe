"""What the callgrind scripts share: the common options, the scratch directory and the run-and-subtract loop.

`callgrind.py` (stdio, one call in flight) and `callgrind_http.py` (Streamable HTTP, many in flight) differ only in
how they start and drive toolgate; both run it once with no counted calls and once per `--calls` value under
`valgrind --tool=callgrind`, and print (total - baseline) / calls so startup, handshake, warm-up and shutdown cancel
out. This module holds that loop and its pieces. It starts no process itself and reads only the callgrind output
files the scripts asked valgrind to write in their scratch directory; it never touches the user's state.
"""

import contextlib
import os
import re
import shutil
import tempfile
import time


def add_arguments(parser, warmup, calls):
    """The options both scripts take; `warmup` and `calls` are each script's defaults."""
    parser.add_argument("--toolgate", required=True)
    parser.add_argument("--bench", required=True, help="the toolgate-bench binary (its `upstream` is the server)")
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--calls", default=calls, help="counted calls per run; several values check linearity")
    parser.add_argument("--no-valgrind", action="store_true", help="run natively (a smoke test of the driver)")
    parser.add_argument("--keep", metavar="DIR", help="write the callgrind files here and keep them (for callgrind_annotate)")


def echo_tool(list_tools, timeout=30.0):
    """The echo tool's exposed name from `list_tools()` (a list of tool objects), asked again until it appears: a
    gateway lists an upstream's tools once that upstream has answered, which under valgrind can take a while."""
    deadline = time.monotonic() + timeout
    while True:
        names = [tool["name"] for tool in list_tools()]
        for name in names:
            if name == "echo" or name.endswith("_echo"):
                return name
        if time.monotonic() > deadline:
            raise RuntimeError(f"no echo tool listed after {timeout:.0f} s; listed: {names}")
        time.sleep(0.2)


def call_counts(text):
    """`--calls`: comma-separated counts."""
    return [int(value) for value in text.split(",")]


@contextlib.contextmanager
def scratch_dir(keep, prefix):
    """`keep` when given (kept afterwards), else a fresh temporary directory removed at the end."""
    scratch = keep or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(scratch, exist_ok=True)
    try:
        yield scratch
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


def under_valgrind(command, out, no_valgrind):
    """`command` run by callgrind writing its totals to `out`, or `command` itself with `--no-valgrind`."""
    if no_valgrind:
        return command
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]


def total_instructions(path):
    """The `summary:` (or `totals:`) line of a callgrind output file."""
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            found = re.match(r"^(?:summary|totals):\s+(\d+)", line)
            if found:
                return int(found.group(1))
    raise RuntimeError(f"no totals in {path}")


def per_call(counts, no_valgrind, run, describe):
    """Runs `run(calls)` -> (seconds, instructions or None) for 0 and each count, prints a line per run
    ("N calls <describe>: ...") and then the instructions per call over the 0-call baseline; returns the totals."""
    totals = {}
    for calls in [0, *counts]:
        elapsed, totals[calls] = run(calls)
        print(f"{calls:>6} calls {describe}: {elapsed:6.1f} s, Ir {totals[calls]}", flush=True)
    if not no_valgrind:
        for calls in counts:
            if calls:
                print(f"instructions per call ({calls} calls - 0 calls): {(totals[calls] - totals[0]) / calls:,.0f}")
    return totals
