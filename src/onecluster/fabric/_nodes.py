"""Typed access to a composed YAML tree that keeps line numbers for every error."""

from __future__ import annotations

from collections.abc import Iterator

import yaml

from onecluster.errors import FabricError

__all__ = ["MapNode", "compose"]


def compose(text: str, source: str) -> yaml.Node:
    """Parse ``text`` into a node tree (no Python objects are constructed, nothing executes)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc)
        msg = f"{where}: not valid YAML: {problem}"
        raise FabricError(msg) from exc
    if node is None:
        msg = f"{source}: the file is empty"
        raise FabricError(msg)
    return node


def line_of(node: yaml.Node) -> int:
    """1-based line where ``node`` starts."""
    return int(node.start_mark.line) + 1


class MapNode:
    """A YAML mapping with typed getters; every error names ``source:line`` and the field."""

    def __init__(self, node: yaml.Node, source: str, what: str) -> None:
        self.source = source
        self.what = what
        self.node = node
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, f"{what} must be a mapping of keys to values")
        self._items: dict[str, yaml.Node] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                self.fail(key, f"{what} has a key that is not a plain name")
            if key.value in self._items:
                self.fail(key, f"{what} gives {key.value!r} twice")
            self._items[key.value] = value

    @property
    def line(self) -> int:
        """Line where this mapping starts."""
        return line_of(self.node)

    def fail(self, node: yaml.Node, message: str) -> None:
        """Raise a :class:`FabricError` pointing at ``node``'s line."""
        raise FabricError(f"{self.source}:{line_of(node)}: {message}")

    def check_keys(self, allowed: set[str]) -> None:
        """Reject unknown keys (a typo must not be silently ignored)."""
        for key, value in self._items.items():
            if key not in allowed:
                hint = ", ".join(sorted(allowed))
                self.fail(value, f"{self.what} has unknown field {key!r} (known: {hint})")

    def has(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self._items

    def _scalar(self, key: str, required: bool) -> yaml.ScalarNode | None:
        node = self._items.get(key)
        if node is None:
            if required:
                self.fail(self.node, f"{self.what} is missing the field {key!r}")
            return None
        if not isinstance(node, yaml.ScalarNode):
            self.fail(node, f"field {key!r} of {self.what} must be a single value")
        assert isinstance(node, yaml.ScalarNode)
        return node

    def text(self, key: str, default: str | None = None) -> str:
        """A string field; required unless ``default`` is given."""
        node = self._scalar(key, default is None)
        if node is None:
            assert default is not None
            return default
        if node.value == "":
            self.fail(node, f"field {key!r} of {self.what} is empty")
        return str(node.value)

    def number(self, key: str, default: float | None = None) -> float:
        """A number field; required unless ``default`` is given."""
        node = self._scalar(key, default is None)
        if node is None:
            assert default is not None
            return default
        try:
            return float(node.value)
        except ValueError:
            self.fail(node, f"field {key!r} of {self.what} must be a number, not {node.value!r}")
            raise  # unreachable: fail() raises

    def integer(self, key: str, default: int | None = None) -> int:
        """A whole-number field; required unless ``default`` is given."""
        node = self._scalar(key, default is None)
        if node is None:
            assert default is not None
            return default
        try:
            return int(node.value)
        except ValueError:
            self.fail(
                node, f"field {key!r} of {self.what} must be a whole number, not {node.value!r}"
            )
            raise

    def boolean(self, key: str, default: bool) -> bool:
        """A true/false field."""
        node = self._scalar(key, required=False)
        if node is None:
            return default
        text = node.value.lower()
        if text in {"true", "yes", "on"}:
            return True
        if text in {"false", "no", "off"}:
            return False
        self.fail(node, f"field {key!r} of {self.what} must be true or false, not {node.value!r}")
        raise AssertionError  # unreachable

    def seq(self, key: str, required: bool = False) -> Iterator[yaml.Node]:
        """The items of a list field."""
        node = self._items.get(key)
        if node is None:
            if required:
                self.fail(self.node, f"{self.what} is missing the list {key!r}")
            return iter(())
        if not isinstance(node, yaml.SequenceNode):
            self.fail(node, f"field {key!r} of {self.what} must be a list")
        return iter(node.value)

    def str_list(self, key: str, required: bool = False) -> list[str]:
        """A list of plain strings."""
        out: list[str] = []
        for item in self.seq(key, required):
            if not isinstance(item, yaml.ScalarNode) or item.value == "":
                self.fail(item, f"every item of {key!r} in {self.what} must be a name")
            out.append(str(item.value))
        return out

    def mapping(self, key: str, what: str) -> MapNode | None:
        """A nested mapping field, or ``None`` when absent."""
        node = self._items.get(key)
        if node is None:
            return None
        return MapNode(node, self.source, what)

    def items(self) -> Iterator[tuple[str, yaml.Node]]:
        """Key/value pairs in file order."""
        return iter(self._items.items())
