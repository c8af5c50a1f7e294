"""Audited exports, the pure parts: the register's Merkle tree and de-identification.

* :mod:`onecluster.export.merkle` — RFC 9162 tree heads and proofs, public for auditors.
* :func:`deidentify` — one CSV, JSON Lines or Parquet file through a :class:`Profile`
  (``docs/export.md``): keyed pseudonyms, masks, generalisation, drops, and detectors for
  identifiers the profile did not declare; the output is streamed, hashed as it is
  written, and put in place only when the whole input was read.
* :func:`find` — the detectors on one text.
* :func:`required_route` — which legal route a year's distinct individuals call for.
* :func:`is_export`, :func:`relay_allowed` — which transfers take data out of a jurisdiction
  that controls exports, and where they may be relayed.
"""

from onecluster.export import merkle
from onecluster.export._deid import FORMATS, deidentify, format_of
from onecluster.export._detect import ALL_KINDS, DETECTOR_VERSION, Finding, Kind, find
from onecluster.export._errors import MalformedInputError, ProfileError
from onecluster.export._policy import is_export, relay_allowed
from onecluster.export._profile import Profile, load_profile, parse_profile, profile_from_bytes
from onecluster.export._pseudonym import MIN_KEY_BYTES, Pseudonymiser
from onecluster.export._report import DeidReport, FieldCount, KindCount
from onecluster.export._rules import Action, FieldRule, Generalisation, OnDetect
from onecluster.export._thresholds import Route, RouteRequirement, YearTally, required_route

__all__ = [
    "ALL_KINDS",
    "DETECTOR_VERSION",
    "FORMATS",
    "MIN_KEY_BYTES",
    "Action",
    "DeidReport",
    "FieldCount",
    "FieldRule",
    "Finding",
    "Generalisation",
    "Kind",
    "KindCount",
    "MalformedInputError",
    "OnDetect",
    "Profile",
    "ProfileError",
    "Pseudonymiser",
    "Route",
    "RouteRequirement",
    "YearTally",
    "deidentify",
    "find",
    "format_of",
    "is_export",
    "load_profile",
    "merkle",
    "parse_profile",
    "profile_from_bytes",
    "relay_allowed",
    "required_route",
]
