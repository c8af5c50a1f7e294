"""The Python SDK of the onecluster API (sync, httpx)."""

from onecluster.client._client import Client
from onecluster.client._errors import error_from_response
from onecluster.client._servers import ServerList, parse_servers
from onecluster.client._token import usable_token

__all__ = ["Client", "ServerList", "error_from_response", "parse_servers", "usable_token"]
