"""Fabric files: the YAML an admin writes to declare sites, circuits, teams and datasets."""

from onecluster.fabric._loader import load_fabric, parse_fabric

__all__ = ["load_fabric", "parse_fabric"]
