"""``onecluster up``: the fabric as real local processes, a replayed workload, a live view."""

from onecluster.launch import ADMIN_TOKEN_FILE, SERVER_URL_FILE
from onecluster.up._config import UpConfig
from onecluster.up._run import run_up

__all__ = ["ADMIN_TOKEN_FILE", "SERVER_URL_FILE", "UpConfig", "run_up"]
