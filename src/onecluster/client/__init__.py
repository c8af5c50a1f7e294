"""The Python SDK of the onecluster API (sync, httpx)."""

from onecluster.client._client import Client
from onecluster.client._errors import error_from_response

__all__ = ["Client", "error_from_response"]
