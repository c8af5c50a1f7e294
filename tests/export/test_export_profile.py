"""Profiles: the schema parsed, everything unknown refused with its place named; the value
rules (mask, generalise); keyed pseudonyms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from onecluster.errors import ValidationError
from onecluster.export import (
    Action,
    FieldRule,
    Generalisation,
    Kind,
    OnDetect,
    Profile,
    ProfileError,
    Pseudonymiser,
    load_profile,
    parse_profile,
)
from onecluster.export._rules import generalise, mask

FULL = """
version: 1
name: crm-customers
detectors: [cn_mobile, email]
on_detect: redact
subjects: [cn_resident_id, cn_mobile]
fields:
  id_no: {action: pseudonym, kind: cn_resident_id, subject: true, prefix: CID}
  phone: {action: mask, keep_first: 3, keep_last: 4, char: "#"}
  birth_date: {action: generalise, to: year_month}
  age: {action: generalise, to: band, width: 5, top: 90}
  ip: {action: generalise, to: ip_prefix}
  postcode: {action: generalise, to: prefix, keep: 2}
  note: drop
  product: keep
  diagnosis: {action: keep, sensitive: true}
  comment: {action: scan, detectors: [cn_resident_id]}
"""


def test_a_full_profile_parses(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(FULL)
    profile = load_profile(path)
    assert profile.name == "crm-customers"
    assert profile.on_detect is OnDetect.REDACT
    assert profile.detectors == {Kind.MOBILE, Kind.EMAIL}
    assert profile.subjects == {Kind.RESIDENT_ID, Kind.MOBILE}
    assert profile.sha256 and len(profile.sha256) == 64
    assert profile.fields["id_no"] == FieldRule(
        action=Action.PSEUDONYM,
        kind="cn_resident_id",
        subject=True,
        prefix="CID",
        detectors=profile.detectors,
    )
    assert profile.fields["phone"].mask_char == "#"
    assert profile.fields["age"].to is Generalisation.BAND and profile.fields["age"].top == 90
    assert profile.fields["note"].action is Action.DROP
    assert profile.fields["comment"].detectors == {Kind.RESIDENT_ID}
    # A field not named is scanned with the profile's detectors.
    assert profile.rule("other") == FieldRule(detectors=profile.detectors)


def test_json_is_a_profile_too(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 1, "fields": {"a": "drop"}}))
    assert load_profile(path).fields["a"].action is Action.DROP


def test_the_default_profile_scans_everything_for_everything() -> None:
    rule = Profile().rule("anything")
    assert rule.action is Action.SCAN and rule.detectors == frozenset(Kind)
    assert Profile().subjects == {Kind.RESIDENT_ID}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fields: {}", "'version' must be 1"),
        ("version: 2", "'version' must be 1"),
        ("version: true", "'version' must be 1"),
        ("version: 1\nfield: {}", "unknown key 'field'"),
        ("version: 1\nfields: [a, b]", "fields must be a mapping"),
        ("version: 1\nfields: {a: hide}", "field 'a': action is 'hide'"),
        ("version: 1\nfields: {a: {kind: text}}", "field 'a': action is None"),
        ("version: 1\nfields: {a: {action: mask, to: year}}", "unknown key 'to' for the action"),
        ("version: 1\nfields: {a: {action: pseudonym, kind: phone}}", "unknown kind 'phone'"),
        ("version: 1\nfields: {a: {action: generalise}}", "field 'a': to is None"),
        ("version: 1\nfields: {a: {action: generalise, to: decade}}", "to is 'decade'"),
        ("version: 1\nfields: {a: {action: mask, keep_first: -1}}", "keep_first must be"),
        ("version: 1\nfields: {a: {action: mask, keep_first: '3'}}", "keep_first must be"),
        ("version: 1\nfields: {a: {action: mask, char: '**'}}", "'char' must be one"),
        ("version: 1\nfields: {a: {action: pseudonym, prefix: 'my token'}}", "'prefix' must"),
        ("version: 1\nfields: {a: {action: pseudonym, subject: yes please}}", "subject must"),
        ("version: 1\nfields: {a: {action: drop, sensitive: true}}", "dropped field"),
        ("version: 1\nfields: {a: {action: scan, detectors: [phone]}}", "unknown detector"),
        ("version: 1\ndetectors: cn_mobile", "detectors must be a list"),
        ("version: 1\nsubjects: [passport]", "unknown detector 'passport'"),
        ("version: 1\non_detect: mask", "on_detect is 'mask'"),
        ("version: 1\nname: 3", "'name' must be a string"),
        ("version: 1\nfields:\n  a: drop\n  a: keep", "the key 'a' is given twice (line 4)"),
        ("version: 1\nfields: {a: [drop", "not valid YAML"),
        ("- just a list", "must be a mapping"),
    ],
)
def test_what_a_profile_may_not_say_is_refused_naming_the_place(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert message in caught.value.message
    assert caught.value.exit_code == 2


def test_an_unreadable_profile_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read the profile"):
        load_profile(tmp_path / "missing.yaml")


def test_missing_columns_are_named_with_the_columns_there_are() -> None:
    profile = parse_profile({"version": 1, "fields": {"phone": "drop", "mail": "keep"}})
    profile.check_columns(["phone", "mail", "x"], source="the header")
    with pytest.raises(ProfileError) as caught:
        profile.check_columns(["id", "phone"], source="the header of a.csv")
    assert caught.value.message == (
        "the profile names 'mail', which the header of a.csv lacks (it has 'id', 'phone')"
    )


# -- mask and generalise -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "last", "value", "expected"),
    [
        (3, 4, "13812345678", "138****5678"),
        (0, 4, "6222021234567890128", "***************0128"),
        (1, 0, "张三丰", "张**"),
        (3, 4, "1234567", "*******"),  # nothing would be hidden: all of it is
        (0, 0, "abc", "***"),
    ],
)
def test_mask(first: int, last: int, value: str, expected: str) -> None:
    assert mask(FieldRule(action=Action.MASK, keep_first=first, keep_last=last), value) == expected


@pytest.mark.parametrize(
    ("to", "value", "expected"),
    [
        (Generalisation.YEAR, "1987-06-15", "1987"),
        (Generalisation.YEAR, "1987年6月15日", "1987"),
        (Generalisation.YEAR, "19870615", "1987"),
        (Generalisation.YEAR, "１９８７－０６－１５", "1987"),
        (Generalisation.YEAR_MONTH, "1987/6/15", "1987-06"),
        (Generalisation.YEAR_MONTH, "1987-06-15T10:00:00Z", "1987-06"),
        (Generalisation.YEAR_MONTH, "1987", None),
        (Generalisation.YEAR_MONTH, "1987-13-01", None),
        (Generalisation.YEAR, "unknown", None),
        (Generalisation.BAND, "37", "30-39"),
        (Generalisation.BAND, "9", "0-9"),
        (Generalisation.BAND, "37.5", "30-39"),
        (Generalisation.BAND, "-3", None),
        (Generalisation.BAND, "old", None),
        (Generalisation.IP_PREFIX, "192.168.10.20", "192.168.10.0/24"),
        (Generalisation.IP_PREFIX, "2001:db8:85a3::8a2e:370:7334", "2001:db8:85a3::/48"),
        (Generalisation.IP_PREFIX, "not an ip", None),
        (Generalisation.PREFIX, "200031", "200"),
        (Generalisation.PREFIX, "200", None),  # as short as what is kept: nothing hidden
    ],
)
def test_generalise(to: Generalisation, value: str, expected: str | None) -> None:
    rule = FieldRule(action=Action.GENERALISE, to=to, keep=3)
    assert generalise(rule, value) == expected


def test_bands_with_a_top() -> None:
    rule = FieldRule(action=Action.GENERALISE, to=Generalisation.BAND, width=5, top=90)
    assert [generalise(rule, v) for v in ("0", "44", "89.9", "90", "104")] == [
        "0-4",
        "40-44",
        "85-89",
        "90+",
        "90+",
    ]


# -- pseudonyms ------------------------------------------------------------------------


def test_tokens_are_stable_per_key_and_differ_across_keys_and_kinds() -> None:
    one, two = Pseudonymiser(b"k" * 32), Pseudonymiser(b"q" * 32)
    token, digest = one.token("cn_mobile", "13812345678", "MOBILE")
    assert token == one.token("cn_mobile", "13812345678", "MOBILE")[0]
    assert token.startswith("MOBILE_") and len(token) == len("MOBILE_") + 16
    assert set(token[7:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    assert len(digest) == 16
    assert two.token("cn_mobile", "13812345678", "MOBILE")[0] != token
    assert one.token("text", "13812345678", "MOBILE")[0] != token
    assert one.token("cn_mobile", "13812345678", "P")[1] == digest  # the prefix is cosmetic
    assert one.key_id != two.key_id and len(one.key_id) == 16
    assert "k" * 16 not in one.key_id


def test_a_short_key_is_refused_and_says_why() -> None:
    with pytest.raises(ValidationError, match=r"too short.*trying every key"):
        Pseudonymiser(b"secret")
