"""The MCP Python SDK 2.3 client's own OAuth support against toolgate: `ClientCredentialsOAuthProvider` on the
SDK's HTTP client, so the SDK itself meets toolgate's 401, discovers the protected-resource metadata and the
authorization server from it, gets a client-credentials token for toolgate's resource, and calls a tool.

Usage: oauth_client.py URL ISSUER CLIENT_ID CLIENT_SECRET SCOPE TOOL
Prints one JSON object: the tool's texts and whether it was an error, and the requests the SDK made (method, URL
without query, status), so the Rust test (crates/proxy/tests/oauth.rs) can check the discovery happened. Nothing
here asserts; every wait is bounded by the Rust test's hang guard.
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client


class MemoryStorage:
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def main():
    url, issuer, client_id, secret, scope, tool = sys.argv[1:7]
    seen = []

    async def record(response):
        seen.append({"method": response.request.method, "url": str(response.request.url).split("?")[0],
                     "status": response.status_code})

    provider = ClientCredentialsOAuthProvider(
        server_url=url, storage=MemoryStorage(), client_id=client_id, client_secret=secret, scope=scope, issuer=issuer
    )
    http = httpx2.AsyncClient(auth=provider, event_hooks={"response": [record]}, timeout=30)
    async with http:
        async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
            result = await client.call_tool(tool, {})
            texts = [item.text for item in result.content if getattr(item, "type", None) == "text"]
            print(json.dumps({"texts": texts, "isError": bool(result.is_error), "requests": seen}))


anyio.run(main)
