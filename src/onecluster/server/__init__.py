"""The onecluster server: FastAPI app, role-token auth, routes and the reconcile loop."""

from onecluster.server._app import create_app
from onecluster.server._auth import Principal, hash_token
from onecluster.server._cluster_register import copy_register
from onecluster.server._config import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.server._reconcile import Reconciler, ReconcileStats
from onecluster.server._serve import serve

__all__ = [
    "ControlPlane",
    "Principal",
    "ReconcileStats",
    "Reconciler",
    "ServerConfig",
    "copy_register",
    "create_app",
    "hash_token",
    "serve",
]
