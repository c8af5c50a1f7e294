"""onecluster: GPU clusters in several data centres, joined by private circuits, as one cluster.

The public surface of the package root is deliberately small; each area (``model``,
``fabric``, ``scheduler``, ``simulate``, ``server``, ``agent``, ``client`` …) curates its own.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
