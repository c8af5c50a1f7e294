"""This host's network through ``ip``, ``tc`` and ``sysctl`` (iproute2): network namespaces,
links, addresses, routes and rate limits.  Used by the lab to build emulated fabrics and by
the agent to program the routes the server computes.  Every failure is a
:class:`~onecluster.errors.BackendError` that names the command and what it printed."""

from onecluster.network._ip import (
    NETNS_DIR,
    add_address,
    add_bridge,
    add_veth,
    delete_link,
    delete_netns,
    device_with_address,
    in_netns,
    link_exists,
    list_netns,
    netns_path,
    netns_pids,
    new_netns,
    set_link,
    set_sysctl,
    set_tbf,
    show_routes,
)
from onecluster.network._routes import KernelRoute, KernelRoutes, RouteSink

__all__ = [
    "NETNS_DIR",
    "KernelRoute",
    "KernelRoutes",
    "RouteSink",
    "add_address",
    "add_bridge",
    "add_veth",
    "delete_link",
    "delete_netns",
    "device_with_address",
    "in_netns",
    "link_exists",
    "list_netns",
    "netns_path",
    "netns_pids",
    "new_netns",
    "set_link",
    "set_sysctl",
    "set_tbf",
    "show_routes",
]
