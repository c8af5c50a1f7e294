"""De-identification profiles: what to do with each column or field (schema in docs/export.md).

A profile is a YAML or JSON file::

    version: 1
    name: crm-customers            # optional, recorded in the report
    detectors: [cn_mobile, email]  # what runs on scanned fields (default: every detector)
    on_detect: pseudonym           # or redact
    subjects: [cn_resident_id]     # found kinds that identify an individual (the default)
    fields:
      id_no: {action: pseudonym, kind: cn_resident_id, subject: true}
      phone: {action: mask, keep_first: 3, keep_last: 4}
      birth_date: {action: generalise, to: year}
      note: drop
      product: keep

A field not named is *scanned*: the profile's detectors run on it and what they find is
pseudonymised (or redacted).  :func:`parse_profile` refuses anything it does not
understand — an unknown key, action, kind or detector, a duplicate key, a wrong type —
naming where, so a typo never silently exports a column in the clear.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import yaml

from onecluster.export._detect import ALL_KINDS, Kind
from onecluster.export._errors import ProfileError
from onecluster.export._rules import Action, FieldRule, Generalisation, OnDetect

__all__ = ["Profile", "load_profile", "parse_profile"]

_TOP_KEYS = {"version", "name", "detectors", "on_detect", "subjects", "fields"}
_COMMON = {"action", "kind", "subject", "sensitive"}
_EXTRA: dict[Action, set[str]] = {
    Action.PSEUDONYM: {"prefix"},
    Action.MASK: {"keep_first", "keep_last", "char"},
    Action.DROP: set(),
    Action.GENERALISE: {"to", "width", "top", "keep"},
    Action.KEEP: set(),
    Action.SCAN: {"detectors"},
}
_KINDS = ", ".join(sorted(k.value for k in Kind))
_E = TypeVar("_E", Action, Generalisation, OnDetect)


@dataclass(frozen=True, slots=True)
class Profile:
    """A parsed profile.  ``Profile()`` is the default: every field scanned by every
    detector, what they find pseudonymised, resident IDs counted as individuals."""

    fields: Mapping[str, FieldRule] = field(default_factory=lambda: MappingProxyType({}))
    detectors: frozenset[Kind] = ALL_KINDS
    on_detect: OnDetect = OnDetect.PSEUDONYM
    subjects: frozenset[Kind] = frozenset({Kind.RESIDENT_ID})
    name: str | None = None
    #: SHA-256 (hex) of the file the profile was read from, for the register.
    sha256: str | None = None

    def rule(self, name: str) -> FieldRule:
        """The rule for the column or field ``name``: its own, or scanning by default."""
        found = self.fields.get(name)
        return found if found is not None else FieldRule(detectors=self.detectors)

    def check_columns(self, present: Iterable[str], *, source: str) -> None:
        """Refuse (:class:`ProfileError`) a profile naming a column ``present`` lacks,
        naming the missing ones and those there are."""
        there = list(dict.fromkeys(present))
        missing = [name for name in self.fields if name not in set(there)]
        if missing:
            names = ", ".join(repr(m) for m in missing)
            columns = ", ".join(repr(c) for c in there) or "none"
            msg = f"the profile names {names}, which {source} lacks (it has {columns})"
            raise ProfileError(msg, hint="fix the names in the profile; nothing was written")


def load_profile(path: Path) -> Profile:
    """Read and parse the profile file at ``path`` (YAML or JSON)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        msg = f"cannot read the profile {path}: {exc.strerror or exc}"
        raise ProfileError(msg) from exc
    return profile_from_bytes(raw, source=str(path))


def profile_from_bytes(raw: bytes, *, source: str = "the profile") -> Profile:
    """Parse a profile's text (YAML or JSON), as a file or an approval holds it."""
    try:
        data = yaml.load(raw, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        msg = f"{source} is not valid YAML or JSON: {exc}"
        raise ProfileError(msg) from exc
    return parse_profile(data, source=source, sha256=hashlib.sha256(raw).hexdigest())


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice (which one would win?)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                msg = f"the key {key!r} is given twice (line {key_node.start_mark.line + 1})"
                raise ProfileError(msg)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_profile(
    data: object, *, source: str = "the profile", sha256: str | None = None
) -> Profile:
    """A :class:`Profile` from parsed YAML/JSON ``data``; :class:`ProfileError` naming the
    place of the first thing wrong."""
    top = _mapping(data, source)
    _only(top, _TOP_KEYS, source)
    if top.get("version") != 1 or isinstance(top.get("version"), bool):
        msg = (
            f"{source}: 'version' must be 1 (the only version there is), not {top.get('version')!r}"
        )
        raise ProfileError(msg)
    detectors = _kinds(top.get("detectors", sorted(ALL_KINDS)), f"{source}: detectors")
    subjects = _kinds(top.get("subjects", [Kind.RESIDENT_ID.value]), f"{source}: subjects")
    on_detect = _choice(top.get("on_detect", "pseudonym"), OnDetect, f"{source}: on_detect")
    name = top.get("name")
    if name is not None and not isinstance(name, str):
        raise ProfileError(f"{source}: 'name' must be a string")
    fields = _mapping(top.get("fields", {}), f"{source}: fields")
    rules = {
        str(column): _rule(spec, detectors, f"{source}: field {column!r}")
        for column, spec in fields.items()
    }
    return Profile(
        fields=MappingProxyType(rules),
        detectors=detectors,
        on_detect=on_detect,
        subjects=subjects,
        name=name,
        sha256=sha256,
    )


def _rule(spec: object, detectors: frozenset[Kind], where: str) -> FieldRule:
    if isinstance(spec, str):  # the short form: just the action
        spec = {"action": spec}
    body = _mapping(spec, where)
    action = _choice(body.get("action"), Action, f"{where}: action")
    _only(body, _COMMON | _EXTRA[action], where, f" for the action {action.value!r}")
    kind = body.get("kind", "text")
    if kind != "text" and kind not in {k.value for k in Kind}:
        msg = f"{where}: unknown kind {kind!r} (text, {_KINDS})"
        raise ProfileError(msg)
    to = body.get("to")
    if action is Action.GENERALISE:
        to = _choice(to, Generalisation, f"{where}: to")
    scanned = body.get("detectors")
    rule = FieldRule(
        action=action,
        kind=kind,
        prefix=_text(body.get("prefix"), f"{where}: prefix"),
        subject=_flag(body.get("subject", False), f"{where}: subject"),
        sensitive=_flag(body.get("sensitive", False), f"{where}: sensitive"),
        keep_first=_count(body.get("keep_first", 0), f"{where}: keep_first"),
        keep_last=_count(body.get("keep_last", 0), f"{where}: keep_last"),
        mask_char=_text(body.get("char"), f"{where}: char") or "*",
        to=to,
        width=_count(body.get("width", 10), f"{where}: width"),
        top=_count(body["top"], f"{where}: top") if "top" in body else None,
        keep=_count(body.get("keep", 3), f"{where}: keep"),
        detectors=_kinds(scanned, f"{where}: detectors") if scanned is not None else detectors,
    )
    try:
        rule.check()
    except ValueError as exc:
        raise ProfileError(f"{where}: {exc}") from None
    return rule


def _mapping(data: object, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        msg = f"{where} must be a mapping of names to values"
        raise ProfileError(msg)
    return data


def _only(body: Mapping[str, Any], allowed: set[str], where: str, suffix: str = "") -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        msg = f"{where}: unknown key {unknown[0]!r}{suffix} (allowed: {', '.join(sorted(allowed))})"
        raise ProfileError(msg)


def _choice(value: object, enum: type[_E], where: str) -> _E:
    for member in enum:
        if value == member.value:
            return member
    choices = ", ".join(e.value for e in enum)
    msg = f"{where} is {value!r}; it must be one of {choices}"
    raise ProfileError(msg)


def _kinds(value: object, where: str) -> frozenset[Kind]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f"{where} must be a list of detector names ({_KINDS})"
        raise ProfileError(msg)
    unknown = [v for v in value if v not in {k.value for k in Kind}]
    if unknown:
        msg = f"{where}: unknown detector {unknown[0]!r} ({_KINDS})"
        raise ProfileError(msg)
    return frozenset(Kind(v) for v in value)


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ProfileError(f"{where} must be true or false, not {value!r}")
    return value


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProfileError(f"{where} must be a whole number ≥ 0, not {value!r}")
    return value


def _text(value: object, where: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ProfileError(f"{where} must be a non-empty string, not {value!r}")
    return value
