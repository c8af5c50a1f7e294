"""The onecluster server: FastAPI app, role-token auth, routes and the reconcile loop."""

from onecluster.server._app import create_app
from onecluster.server._auth import Principal, hash_token
from onecluster.server._config import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.server._reconcile import Reconciler, ReconcileStats
from onecluster.server._serve import SERVER_URL_FILE, serve

__all__ = [
    "SERVER_URL_FILE",
    "ControlPlane",
    "Principal",
    "ReconcileStats",
    "Reconciler",
    "ServerConfig",
    "create_app",
    "hash_token",
    "serve",
]
