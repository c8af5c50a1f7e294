"""The detectors: every kind found in every variant, spans mapped back to the original, and
check-digit failures and ordinary numbers left alone."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onecluster.export import Kind, find
from onecluster.export._detect import canonical
from onecluster.export._identifiers import luhn_ok, mobile, plausible_card, resident_id
from onecluster.export._normalise import normalise

ID = "11010519491231002X"  # GB 11643's own example
ID2 = "440305199001011234"  # made valid below
MOBILE = "13812345678"
CARD = "6222021234567890128"  # UnionPay, 19 digits, Luhn-valid (checked below)
CARD16 = "4111111111111111"
EMAIL = "zhang.san@example.com"
IPV4 = "192.168.10.20"
IPV6 = "2001:db8:85a3::8a2e:370:7334"

_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _with_check(body: str) -> str:
    total = sum(int(c) * w for c, w in zip(body, _WEIGHTS, strict=True))
    return body + "10X98765432"[total % 11]


ID2 = _with_check("44030519900101123")
FULLWIDTH = str.maketrans({chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)})


def kinds(text: str) -> list[tuple[str, str, str]]:
    """(kind, the original characters of the span, canonical value) of each finding."""
    return [(f.kind.value, text[f.start : f.end], f.value) for f in find(text)]


def test_the_test_identifiers_are_valid() -> None:
    assert resident_id(ID) == ID
    assert resident_id(ID2) == ID2
    assert luhn_ok(CARD) and luhn_ok(CARD16)
    assert mobile(MOBILE) == MOBILE


# -- every kind, every variant ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "canon"),
    [
        ("cn_resident_id", ID, ID),
        ("cn_resident_id", ID2, ID2),
        ("cn_mobile", MOBILE, MOBILE),
        ("bank_card", CARD, CARD),
        ("bank_card", CARD16, CARD16),
        ("email", EMAIL, EMAIL),
        ("ipv4", IPV4, IPV4),
        ("ipv6", IPV6, IPV6),
    ],
)
@pytest.mark.parametrize(
    "variant",
    ["plain", "fullwidth", "after_cjk", "zero_width", "free_text", "cjk_both_sides", "line_end"],
)
def test_every_kind_in_every_variant(kind: str, value: str, canon: str, variant: str) -> None:
    written = {
        "plain": value,
        "fullwidth": value.translate(FULLWIDTH),
        "after_cjk": "号码" + value,
        "zero_width": "\u200b".join(value[:4]) + value[4:8] + "\u2060" + value[8:] + "\ufeff",
        "free_text": f"Hello, 请联系 {value} if needed.",
        "cjk_both_sides": f"客户{value}反馈",
        "line_end": f"line one\nline two {value}",
    }[variant]
    if variant == "zero_width":
        # a zero-width character before the first character would sit outside the span
        written = written.removesuffix("\ufeff")
    found = kinds(written)
    assert [(k, c) for k, _, c in found] == [(kind, canon)], written
    # The span is exactly the identifier as written: nothing around it is taken.
    start = written.index(found[0][1])
    assert written[:start] + written[start + len(found[0][1]) :] in (
        "",
        "号码",
        "Hello, 请联系  if needed.",
        "客户反馈",
        "line one\nline two ",
    )


@pytest.mark.parametrize(
    ("written", "kind", "canon"),
    [
        ("138 1234 5678", "cn_mobile", MOBILE),
        ("138-1234-5678", "cn_mobile", MOBILE),
        ("138 - 1234 - 5678", "cn_mobile", MOBILE),
        ("138\t1234\t5678", "cn_mobile", MOBILE),
        ("+86 138 1234 5678", "cn_mobile", MOBILE),
        ("+8613812345678", "cn_mobile", MOBILE),
        ("0086-138-1234-5678", "cn_mobile", MOBILE),
        ("8613812345678", "cn_mobile", MOBILE),
        ("１３８－１２３４－５６７８", "cn_mobile", MOBILE),
        ("138\u200b1234\u200c5678", "cn_mobile", MOBILE),
        ("138—1234—5678", "cn_mobile", MOBILE),  # em dashes
        ("110105 19491231 002X", "cn_resident_id", ID),
        ("110105-19491231-002x", "cn_resident_id", ID),
        ("6222 0212 3456 7890 128", "bank_card", CARD),
        ("6222-0212-3456-7890-128", "bank_card", CARD),
        ("4111 1111 1111 1111", "bank_card", CARD16),
        ("zhang.san @ example.com", "email", EMAIL),
        ("ZHANG.SAN@EXAMPLE.COM", "email", EMAIL),
        ("ｚｈａｎｇ．ｓａｎ＠ｅｘａｍｐｌｅ．ｃｏｍ", "email", EMAIL),
        ("１９２．１６８．１０．２０", "ipv4", IPV4),
        ("192.168.010.020", "ipv4", IPV4),
        ("2001:0db8:85a3:0000:0000:8a2e:0370:7334", "ipv6", IPV6),
        ("fe80::1%eth0", "ipv6", "fe80::1"),
    ],
)
def test_separators_and_other_spellings(written: str, kind: str, canon: str) -> None:
    assert [(k, c) for k, _, c in kinds(written)] == [(kind, canon)]
    assert kinds(written)[0][1] == written  # the whole of it, separators included


def test_labels_glued_to_numbers_are_not_part_of_them() -> None:
    assert kinds(f"ID{ID}") == [("cn_resident_id", ID, ID)]
    assert kinds(f"Tel{MOBILE}") == [("cn_mobile", MOBILE, MOBILE)]
    assert kinds(f"登录IP{IPV4}。") == [("ipv4", IPV4, IPV4)]
    assert kinds(f"QQ:{MOBILE}") == [("cn_mobile", MOBILE, MOBILE)]
    assert kinds(f"联系方式：{IPV6}，") == [("ipv6", IPV6, IPV6)]


def test_two_numbers_side_by_side_are_both_found() -> None:
    text = f"{MOBILE} 13912345678 {CARD16}"
    assert [k for k, _, _ in kinds(text)] == ["cn_mobile", "cn_mobile", "bank_card"]
    assert [k for k, _, _ in kinds(f"{MOBILE}-2")] == ["cn_mobile"]


def test_an_email_made_of_a_phone_number_is_one_email() -> None:
    assert kinds(f"{MOBILE}@qq.com") == [("email", f"{MOBILE}@qq.com", f"{MOBILE}@qq.com")]


def test_many_identifiers_in_free_text_keep_their_order_and_spans() -> None:
    text = (
        f"客户张三，身份证{ID}，手机１３８ １２３４ ５６７８，"
        f"卡号{CARD}，邮箱{EMAIL}，登录自{IPV4}和{IPV6}。谢谢"
    )
    found = find(text)
    assert [f.kind for f in found] == [
        Kind.RESIDENT_ID,
        Kind.MOBILE,
        Kind.BANK_CARD,
        Kind.EMAIL,
        Kind.IPV4,
        Kind.IPV6,
    ]
    assert [text[f.start : f.end] for f in found][1] == "１３８ １２３４ ５６７８"
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))


# -- what must not be found -----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        ID[:-1] + "3",  # wrong check character
        _with_check("99030519900101123"),  # no such province
        _with_check("44030519901301123"),  # month 13
        _with_check("44030518990101123"),  # born 1899
        CARD[:-1] + "9",  # Luhn fails
        "4111111111111112",  # Luhn fails
        "1234567890123456",  # Luhn-valid? no; and prefix 1 is no card
        "12345678901",  # 11 digits, not 1[3-9]
        "10012345678",  # 11 digits starting 10
        "+1 3812345678",  # another country's number
        "1381234567",  # 10 digits
        "138123456789",  # 12 digits
        "2024011512345678",  # an order number: prefix 20 is no card
        "1700000000000",  # epoch milliseconds
        "2025-01-15 13:45:12",
        "2025-01-15T13:45:12Z",
        "¥1,299.00 ×3",
        "12,345,678.90",
        "v2.3.1",
        "3.11.7",
        "10:30:00",
        "std::map<int, int>",
        "00:1A:2B:3C:4D:5E",  # a MAC address
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "a1458122-4705-eaf5-6a8b-c6a693b2234c",
        "426670ee-e165-0570-4787-ed0b802c48ec",
        "SKU-88231-A",
        "not @ all",
        "user@localhost",
        "256.1.1.1",
        "1.2.3.4.5",
        f"{MOBILE}abc",  # glued to letters on the right: part of a code
        f"x{MOBILE}0",
        "::",
    ],
)
def test_ordinary_text_and_failed_checks_are_not_flagged(text: str) -> None:
    assert find(text) == []


def test_the_kinds_asked_for_are_the_only_ones_found() -> None:
    text = f"{ID} {MOBILE} {EMAIL}"
    assert [f.kind for f in find(text, frozenset({Kind.MOBILE}))] == [Kind.MOBILE]
    assert find(text, frozenset()) == []


def test_a_resident_id_wins_over_a_card_it_could_also_be() -> None:
    luhn_id = next(
        _with_check(f"44030519900101{n:03d}")
        for n in range(1000)
        if luhn_ok(_with_check(f"44030519900101{n:03d}"))
        and not _with_check(f"44030519900101{n:03d}").endswith("X")
    )
    assert [f.kind for f in find(luhn_id)] == [Kind.RESIDENT_ID]


def test_card_issuer_rules() -> None:
    assert plausible_card("4111111111111111")
    assert plausible_card("378282246310005")  # Amex, 15
    assert plausible_card("36227206271667")  # Diners, 14
    assert plausible_card("5555555555554444")
    assert plausible_card("2223003122003222")  # Mastercard 2-series
    assert not plausible_card("4222222222222")  # 13 digits: no longer issued
    assert not plausible_card("1234567812345670")  # Luhn-valid, no issuer starts with 1
    assert not plausible_card("7992739871300000")


# -- canonical values of declared columns ---------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        (Kind.MOBILE, "+86 138-1234-5678", MOBILE),
        (Kind.MOBILE, "(138) 1234 5678", MOBILE),
        (Kind.RESIDENT_ID, "11010519491231002x", ID),
        (Kind.BANK_CARD, "6222 0212 3456 7890 128", CARD),
        (Kind.EMAIL, " Zhang.San@Example.COM ", EMAIL),
        (Kind.IPV4, "１９２．１６８．１０．２０", IPV4),
        (Kind.IPV6, "2001:0DB8:85a3::8a2e:0370:7334", IPV6),
        (Kind.MOBILE, "12345", None),
        (Kind.IPV4, IPV6, None),
        (Kind.EMAIL, "nobody", None),
    ],
)
def test_canonical_values(kind: Kind, text: str, expected: str | None) -> None:
    assert canonical(kind, text) == expected


# -- normalisation and the way back --------------------------------------------------


def test_normalise_maps_lookalikes_and_drops_invisible_characters() -> None:
    copy = normalise("１３８\u200b－\u3000a\u00a0b\u2014c\U0001d7cf")
    assert copy.text == "138- a b-c1"
    assert copy.original_span(0, 3) == (0, 3)
    assert copy.original_span(3, 4) == (4, 5)  # after the dropped zero-width space
    assert normalise("plain ascii").same_offsets


_INVISIBLE = st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"])


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=" :中文，。(", max_size=8),
    st.lists(_INVISIBLE, max_size=11),
    st.lists(st.integers(0, 10), max_size=11),
    st.booleans(),
    st.text(alphabet=" 谢谢。,)", max_size=8),
)
def test_zero_width_anywhere_inside_still_maps_back_exactly(
    before: str, marks: list[str], where: list[int], wide: bool, after: str
) -> None:
    digits = list(MOBILE.translate(FULLWIDTH) if wide else MOBILE)
    for mark, position in zip(marks, where, strict=False):
        digits[position] += mark  # after digit `position`, inside the number
    written = "".join(digits)
    written = written.rstrip("".join(_INVISIBLE_CHARS))
    text = before + written + after
    found = find(text)
    assert [(f.kind, f.value) for f in found] == [(Kind.MOBILE, MOBILE)]
    assert text[found[0].start : found[0].end] == written
    assert text[: found[0].start] == before and text[found[0].end :] == after


_INVISIBLE_CHARS = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
