"""A labelled, seeded sample of records with planted identifiers, for recall and speed.

Two kinds of table, both plain lists of string columns:

* ``labelled(n, seed)`` — every row plants identifiers of every kind (resident ID, mobile,
  bank card, e-mail, IPv4, IPv6) in every variant: plain, full-width, right after Chinese
  characters, with spaces or dashes inside, with zero-width characters inside, and inside
  free text; beside non-PII columns that look like identifiers to a careless regex (order
  numbers, timestamps, prices, SKUs, versions, tracking numbers, digests, UUIDs).  Each
  planted identifier is listed with its row, column, kind and canonical value.
* ``typical(n, seed)`` — what training data mostly is: ids, timestamps, scores and a
  sentence or two of text, with an identifier in about one row in twenty.

Survival (:func:`survivors`) is judged without the detectors' own code: an identifier
survives if its digits (or its address) can still be read in the output cell after NFKC,
with every other character removed.
"""

from __future__ import annotations

import ipaddress
import random
import re
import unicodedata
import uuid
from dataclasses import dataclass
from hashlib import sha256

__all__ = [
    "NON_PII",
    "Planted",
    "Sample",
    "false_positives",
    "labelled",
    "survivors",
    "typical",
]

KINDS = ("cn_resident_id", "cn_mobile", "bank_card", "email", "ipv4", "ipv6")
VARIANTS = ("plain", "fullwidth", "after_cjk", "separators", "zero_width", "free_text")
NON_PII = ("record_id", "order_no", "created_at", "amount", "sku", "version", "tracking",
           "digest", "uuid", "quantity")  # fmt: skip
_ZW = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
_AREAS = ("110105", "310104", "440305", "320102", "510107", "330106", "420111", "610113")
_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_SURNAMES = ["zhang", "wang", "li", "zhao", "liu", "chen", "yang", "huang", "zhou", "wu"]
_DOMAINS = ("example.com", "qq.com", "163.com", "corp.example.cn", "mail.example.org")
_CJK = ("身份证号", "手机", "卡号", "邮箱", "地址是", "联系人电话", "客户编号为", "登录IP")
_SENTENCES = (
    "客户反馈物流太慢，希望尽快处理。",
    "The model answered correctly on the second try.",
    "请在三个工作日内回复。",
    "Shipment delayed because of weather in the north.",
    "该用户对售后服务表示满意，评分五星。",
    "Training loss plateaued after epoch 3; lowering the learning rate helped.",
)


@dataclass(frozen=True, slots=True)
class Planted:
    """One planted identifier: where it is, what it is, and how it was written."""

    row: int
    column: str
    kind: str
    canonical: str
    written: str


@dataclass(frozen=True, slots=True)
class Sample:
    """A header, its rows, and what was planted in them."""

    header: list[str]
    rows: list[list[str]]
    planted: list[Planted]


def _resident_id(rng: random.Random) -> str:
    area = rng.choice(_AREAS)
    year, month, day = rng.randint(1950, 2008), rng.randint(1, 12), rng.randint(1, 28)
    body = f"{area}{year:04d}{month:02d}{day:02d}{rng.randint(0, 999):03d}"
    total = sum(int(c) * w for c, w in zip(body, _WEIGHTS, strict=True))
    return body + "10X98765432"[total % 11]


def _luhn_complete(prefix: str) -> str:
    digits = [int(c) for c in prefix + "0"]
    total = 0
    for i, d in enumerate(reversed(digits)):
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return prefix + str((10 - total % 10) % 10)


def _card(rng: random.Random) -> str:
    length = rng.choice((16, 16, 16, 19))
    prefix = rng.choice(("62", "4", "51", "6228", "6217"))
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    return _luhn_complete(body)


def _mobile(rng: random.Random) -> str:
    return "1" + rng.choice("3456789") + "".join(rng.choice("0123456789") for _ in range(9))


def _email(rng: random.Random) -> str:
    name = rng.choice(_SURNAMES) + rng.choice((".", "_", "")) + rng.choice(_SURNAMES)
    return f"{name}{rng.randint(1, 999)}@{rng.choice(_DOMAINS)}"


def _ipv4(rng: random.Random) -> str:
    return ".".join(str(rng.randint(1, 254)) for _ in range(4))


def _ipv6(rng: random.Random) -> str:
    groups = [f"{rng.randint(0, 0xFFFF):x}" for _ in range(8)]
    return str(ipaddress.IPv6Address(":".join(groups)))


_MAKE = {
    "cn_resident_id": _resident_id,
    "cn_mobile": _mobile,
    "bank_card": _card,
    "email": _email,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
}


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _grouped(kind: str, value: str, rng: random.Random) -> str:
    sep = rng.choice((" ", "-", " - ", "\t"))
    if kind == "cn_mobile":
        prefix = rng.choice(("", "+86 ", "0086-", "86 "))
        return prefix + sep.join((value[:3], value[3:7], value[7:]))
    if kind == "cn_resident_id":
        return sep.join((value[:6], value[6:14], value[14:]))
    if kind == "bank_card":
        return sep.join(value[i : i + 4] for i in range(0, len(value), 4))
    if kind == "email":
        local, domain = value.split("@")
        return f"{local} @ {domain}"
    return value  # addresses: separators inside would change what they are


def _zero_width(value: str, rng: random.Random) -> str:
    out = []
    for i, c in enumerate(value):
        out.append(c)
        if i < len(value) - 1 and rng.random() < 0.3:
            out.append(rng.choice(_ZW))
    return "".join(out)


def _written(kind: str, value: str, variant: str, rng: random.Random) -> str:
    if variant == "fullwidth":
        return _fullwidth(value)
    if variant == "after_cjk":
        return rng.choice(_CJK) + value + rng.choice(("", "，谢谢", "。"))
    if variant == "separators":
        return _grouped(kind, value, rng)
    if variant == "zero_width":
        return _zero_width(value, rng)
    if variant == "free_text":
        return f"{rng.choice(_SENTENCES)} 联系方式：{value}，{rng.choice(_SENTENCES)}"
    return value


def _non_pii(row: int, rng: random.Random) -> list[str]:
    order = rng.choice(
        (
            f"2025{rng.randint(101, 1228):04d}{rng.randint(0, 10**10 - 1):010d}",
            f"ORD-{rng.randint(10**7, 10**8 - 1)}",
            f"{rng.randint(10**9, 10**10 - 1)}",
        )
    )
    when = rng.choice(
        (
            f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
            str(1_700_000_000_000 + rng.randint(0, 10**11)),
            f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T08:15:00Z",
        )
    )
    amount = rng.choice(
        (f"{rng.randint(1, 99999)}.{rng.randint(0, 99):02d}", f"¥{rng.randint(1, 999)}.50",
         f"{rng.randint(1, 999)},{rng.randint(100, 999)},{rng.randint(100, 999)}.00")
    )  # fmt: skip
    return [
        str(row),
        order,
        when,
        amount,
        f"SKU-{rng.randint(10000, 99999)}-{rng.choice('ABCDEFG')}",
        rng.choice((f"v{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 30)}", "3.11.7")),
        f"SF{rng.randint(10**12, 10**13 - 1)}",
        sha256(str(row).encode()).hexdigest(),
        str(uuid.UUID(int=rng.getrandbits(128))),
        str(rng.randint(1, 500)),
    ]


def labelled(n: int, seed: int = 14) -> Sample:
    """``n`` rows; each plants one identifier per kind (one variant each, cycling so every
    kind meets every variant) and a free-text note with two more."""
    rng = random.Random(seed)
    header = [*NON_PII, *(f"pii_{k}" for k in KINDS), "note"]
    rows: list[list[str]] = []
    planted: list[Planted] = []
    for row in range(n):
        cells = _non_pii(row, rng)
        for k, kind in enumerate(KINDS):
            value = _MAKE[kind](rng)
            variant = VARIANTS[(row + k) % len(VARIANTS)]
            written = _written(kind, value, variant, rng)
            cells.append(written)
            planted.append(Planted(row, f"pii_{kind}", kind, value, written))
        kinds = rng.sample(KINDS, 2)
        values = [_MAKE[kind](rng) for kind in kinds]
        before, after = rng.choice(_SENTENCES), rng.choice(_SENTENCES)
        note = f"{before}用户{values[0]}反馈，备用{values[1]}。{after}"
        cells.append(note)
        planted.extend(Planted(row, "note", k, v, v) for k, v in zip(kinds, values, strict=True))
        rows.append(cells)
    return Sample(header, rows, planted)


def typical(n: int, seed: int = 14) -> Sample:
    """``n`` rows of typical training records; about one in twenty plants an identifier in
    its text."""
    rng = random.Random(seed)
    header = ["id", "created_at", "user", "lang", "text", "label", "score"]
    rows: list[list[str]] = []
    planted: list[Planted] = []
    for row in range(n):
        text = " ".join(rng.choice(_SENTENCES) for _ in range(rng.randint(2, 6)))
        if rng.random() < 0.05:
            kind = rng.choice(KINDS)
            value = _MAKE[kind](rng)
            text += f" 联系{value}"
            planted.append(Planted(row, "text", kind, value, value))
        rows.append(
            [
                str(row),
                f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                sha256(f"user{rng.randint(0, 5000)}".encode()).hexdigest()[:16],
                rng.choice(("zh", "en")),
                text,
                rng.choice(("positive", "negative", "neutral")),
                f"{rng.random():.4f}",
            ]
        )
    return Sample(header, rows, planted)


def _flat(text: str) -> str:
    """NFKC, lower case, without format characters (zero-width and the like)."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf").lower()


def survivors(
    planted: list[Planted], header: list[str], out_rows: list[list[str]]
) -> list[Planted]:
    """The planted identifiers that can still be read in the output rows (same order)."""
    index = {name: i for i, name in enumerate(header)}
    left = []
    for p in planted:
        cell = _flat(out_rows[p.row][index[p.column]])
        if p.kind in ("email", "ipv4", "ipv6"):
            survived = p.canonical.lower() in cell.replace(" ", "")
        else:
            digits = re.sub(r"[^0-9x]", "", cell)
            survived = p.canonical.lower() in digits
        if survived:
            left.append(p)
    return left


def false_positives(
    header: list[str], rows: list[list[str]], out_rows: list[list[str]]
) -> dict[str, int]:
    """Per non-PII column, how many cells the de-identification changed."""
    changed: dict[str, int] = {}
    for name in NON_PII:
        if name not in header:
            continue
        i = header.index(name)
        changed[name] = sum(1 for a, b in zip(rows, out_rows, strict=True) if a[i] != b[i])
    return changed
