"""A 2026-07-28 MCP Python SDK 2.3 `Client` whose URL-mode elicitation callback plays the person: it opens the page
the question links to in toolgate's console (logging in with a console user's token over plain HTTP), approves the
call with the page's own form, and answers `accept`; the SDK then retries the call with toolgate's state.

Usage: url_approver.py --url MCP_URL --console-token TOKEN --note N

Prints one JSON object: what the callback was asked (mode, url) and the call's result (texts, isError). Every step
is bounded (PATIENCE_SECONDS); nothing here asserts: the Rust test in crates/cli/tests/guardrails/url_mode.rs does.
"""

import argparse
import http.client
import json
import re
import sys
import urllib.parse

import anyio
import mcp.types as types
from mcp import Client

PATIENCE_SECONDS = 60


def request(connection, method, path, body="", cookie=None):
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        headers["Cookie"] = cookie
    connection.request(method, path, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace")


def approve_in_console(url, token):
    """Logs in, reads the approval's page and posts its Approve form; returns the page's status after deciding."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=PATIENCE_SECONDS)
    status, headers, _ = request(connection, "POST", "/console/login", urllib.parse.urlencode({"token": token}))
    cookie = next((value.split(";")[0] for name, value in headers.items() if name.lower() == "set-cookie"), None)
    if status != 303 or cookie is None:
        raise RuntimeError(f"console login refused: {status}")
    status, _, page = request(connection, "GET", parts.path, cookie=cookie)
    if status != 200:
        raise RuntimeError(f"the approval's page answered {status}")
    form = re.search(r'<form method="post" action="([^"]*/approve)">(.*?)</form>', page, re.S)
    if form is None:
        raise RuntimeError("no approve form on the page")
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form.group(2)))
    status, _, _ = request(connection, "POST", form.group(1), urllib.parse.urlencode(fields), cookie=cookie)
    return status


class Person:
    """The elicitation callback: a URL question is approved in the console, then accepted."""

    def __init__(self, token):
        self.token = token
        self.asked = []

    async def __call__(self, context, params):
        mode = getattr(params, "mode", "form")
        url = getattr(params, "url", None)
        entry = {"mode": mode, "url": url}
        if mode == "url" and url and not any(earlier["url"] == url for earlier in self.asked):
            entry["decided"] = await anyio.to_thread.run_sync(approve_in_console, url, self.token)
        self.asked.append(entry)
        return types.ElicitResult(action="accept")


async def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--console-token", required=True)
    parser.add_argument("--note", type=int, required=True)
    args = parser.parse_args()
    person = Person(args.console_token)
    client = Client(args.url, mode="2026-07-28", elicitation_callback=person, cache=None)
    async with client:
        with anyio.fail_after(PATIENCE_SECONDS):
            result = await client.call_tool("delete_note", {"id": args.note})
    texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
    sys.stdout.write(json.dumps({"asked": person.asked, "texts": texts, "isError": bool(result.is_error)}) + "\n")


if __name__ == "__main__":
    anyio.run(main)
