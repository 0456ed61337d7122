"""Personal data in Chinese text: find it, replace it with typed placeholders (pure functions, no Beam).

The corpus stage calls `scrub(lines, mode)` on a document's normalized lines (after text_cleaning's
NFKC has turned full-width digits, letters and ＠ into ASCII). docs/pii.md gives the rules, the
measured precision and recall, and what is knowingly not covered.

    find(text)          -> [Match(kind, start, end), ...]   non-overlapping, by start
    scrub(lines, mode)  -> Scrubbed(lines, counts, drop)     counts: {kind: n}, only kinds found
    redact_text(text)   -> text with every match replaced      (a rejected record's excerpt)

Kinds (the stats.json counter names) and their placeholders:

    mobile    <PHONE>      1[3-9]x, 11 digits; +86 / 0086; 138-1234-5678, 138 1234 5678, 138.1234.5678
    landline  <PHONE>      0xx / 0xxx area code (or +86 / 0086 and the code without 0) + 7-8 digits
                           (brackets, -, —, space; extension),
                           or 7-8 digits after 电话/热线/传真/座机/拨打/拨通/致电/Tel/Fax, and numbers listed after one
    id_number <ID_NUMBER>  18-digit resident identity number (or 6-8-4 groups): province code, birth date 1900-2029,
                           ISO 7064 MOD 11-2 check digit (X allowed)
    bank_card <BANK_CARD>  16-19 digits (plain or in groups of 4): Luhn, issuer prefix 3/4/5/6/9
    email     <EMAIL>      local@domain.tld
    ipv4      <IP>         four octets <= 255; not after a version word; 1.x-9.x only after an address word
    ipv6      <IP>         full or :: compressed (validated by the standard library's ipaddress)
    qq        <QQ>         5-11 digits after QQ/qq/Q号/扣扣/企鹅号 (+号/号码) and : ： 是 为 or nothing
    wechat    <WECHAT>     an id after 微信/微信号/WeChat/weixin/vx/wx/V信 and : ： 是 为 or nothing

Only the value is replaced, a keyword stays: `QQ：12345678` -> `QQ：<QQ>`. Digits are never matched
inside a longer run of digits or letters, before a unit (元, 万, 年, 号, ...), or as part of a decimal;
nothing inside a URL is touched, nor anything shortly after `ISBN`, nor a phone or card number with a
short number, a decimal or a percentage as its whitespace-separated neighbour (a table row).
"""

from __future__ import annotations

import calendar
import ipaddress
import re
from typing import NamedTuple

KINDS = ("mobile", "landline", "id_number", "bank_card", "email", "ipv4", "ipv6", "qq", "wechat")
PLACEHOLDERS = {
    "mobile": "<PHONE>",
    "landline": "<PHONE>",
    "id_number": "<ID_NUMBER>",
    "bank_card": "<BANK_CARD>",
    "email": "<EMAIL>",
    "ipv4": "<IP>",
    "ipv6": "<IP>",
    "qq": "<QQ>",
    "wechat": "<WECHAT>",
}
MODES = ("redact", "drop", "keep")
DEFAULT_MODE = "redact"
DROP_REASON = "personal_data"
"""The drop reason of a document with personal data under mode `drop`."""


class Match(NamedTuple):
    kind: str
    start: int
    end: int


class Scrubbed(NamedTuple):
    lines: list[str]  # the lines with each match replaced (mode redact); the input lines otherwise
    counts: dict[str, int]  # matches per kind, kinds in KINDS order, only those found
    drop: bool  # mode drop and something found: the caller drops the document (DROP_REASON)


# --- the cheap prefilter: most lines of news have none of these, and cost one search ---------------
# One character class first (sre then skips every other character in C), the rest checked only
# where it matched: a run of 5 digits, a digit group after a separator, a dotted quad's start, @, a
# colon group (IPv6) or a WeChat keyword (its ids need no digits; every other kind has >= 5 digits).
_PREFILTER = re.compile(
    r"[0-9@:微WwVv](?:(?<=\d)(?:\d{4}|[ .\-—]\d{4}|\.\d{1,3}\.\d)|(?<=@)|(?<=:)[0-9A-Fa-f]{0,4}:"
    r"|(?<=微)信|(?<=[Ww])e[Cc]hat|(?<=w)eixin|(?<=[Vv])信|(?<=[VvWw])[Xx])"
)

# --- candidates ---------------------------------------------------------------------------------------
# Digits are bounded by anything but digits and Latin letters (serial numbers, model names), and a
# number followed by a unit or a decimal part is an amount, not an identifier.
_START = r"(?<![0-9A-Za-z.])"
_END = r"(?![0-9A-Za-z]|\.\d|\s?[元万亿千百年月日号人次吨件台辆个条家岁米])"
_SEP = r"\s*(?:[:：]|是|为)?\s*"
_MOBILE = re.compile(
    rf"{_START}(?:(?:\+86|0086|\(\+86\)|（\+86）)[ -]?)?1[3-9]\d(?:\d{{8}}|([- .])\d{{4}}\1\d{{4}}){_END}"
)
_AREA = r"0(?:10|2\d|[3-9]\d{2})"
_EXTENSION = r"(?:(?:转|-|ext\.?|分机)\d{1,5})?"
_INTERNATIONAL = rf"(?:\+86|0086)[-\s]?{_AREA[1:]}[-\s]?"  # +86-10-64365566: the code without its 0
_LANDLINE = re.compile(
    rf"{_START}(?:[(（]{_AREA}[)）]\s?|{_AREA}[-—\s]?|{_INTERNATIONAL})[2-9]\d{{6,7}}{_EXTENSION}{_END}"
)
_LOCAL_AFTER_KEYWORD = re.compile(
    rf"(?:电话|热线|传真|座机|拨打|拨通|致电|(?<![A-Za-z])(?:Tel|TEL|tel|Fax|FAX))(?:号码)?{_SEP}([2-9]\d{{6,7}}){_EXTENSION}{_END}"
)
_LISTED_LOCAL = re.compile(rf"\s*(?:[、，,/]|或)\s*([2-9]\d{{6,7}}){_EXTENSION}{_END}")
# 18 characters, or grouped 6-8-4 (region, birth date, sequence and check) by spaces or hyphens
_ID = re.compile(r"(?<![0-9A-Za-z])[1-9]\d{5}([ -]?)(?:19\d\d|20[0-2]\d)\d{4}\1\d{3}[\dXx](?![0-9A-Za-z])")
_CARD = re.compile(rf"{_START}(?:\d{{4}}(?:[ -]\d{{4}}){{3}}(?:[ -]?\d{{1,3}})?|\d{{16,19}}){_END}")
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![0-9A-Za-z.]){_OCTET}(?:\.{_OCTET}){{3}}(?![0-9A-Za-z]|\.\d)")
_VERSION_BEFORE = re.compile(r"(?:版本|版本号|[Vv]ersion|[Vv]er|[Vv])[\s:：.号为是]*$")
_IP_WORD_BEFORE = re.compile(r"IP|ip|Ip|地址|服务器|主机|[Hh]ost|网关|DNS|登录|登陆|访问")
_IPV6 = re.compile(r"(?<![0-9A-Za-z:.])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![0-9A-Za-z:]|\.\d)")
_QQ = re.compile(
    rf"(?<![A-Za-z])(?:QQ|qq|Qq|Q号|扣扣|企鹅号)(?:号码|号)?{_SEP}([1-9]\d{{4,10}})(?![0-9A-Za-z])"
)
_WECHAT = re.compile(
    r"(?<![A-Za-z])(?:微信号码|微信号|微信|WeChat|Wechat|wechat|weixin|[Vv]信|vx|VX|Vx|wx|WX)(?:ID|id)?"
    r"\s*([:：]|是|为)?\s*([A-Za-z][A-Za-z0-9_-]{5,19}|1[3-9]\d{9}|[1-9]\d{4,10})(?![0-9A-Za-z_-])"
)
_WECHAT_NOT_IDS = {"wechat", "weixin", "official", "number", "account"}
# A figure in a table row: a whitespace-separated neighbour that is a short number, a decimal or a
# percentage (`1997年 13526789012 14.5`); a list of phone numbers has only long numbers around them.
_NUMBER_BEFORE = re.compile(r"(?<!\S)(\d[\d.,%]*)\s+$")
_NUMBER_AFTER = re.compile(r"\s+(\d[\d.,%]*)(?!\S)")
_TABLE_KINDS = frozenset(("mobile", "landline", "bank_card"))
_URL = re.compile(r"(?:https?|ftp)://[!-~]+|www\.[A-Za-z0-9-]+\.[!-~]+")
_ISBN = re.compile(r"ISBN|isbn")

# Overlapping candidates: the earliest wins, at the same start the one listed first here.
_PRIORITY = {k: i for i, k in enumerate(("wechat", "qq", "id_number", "bank_card", "mobile", "landline"))}

_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 54 61 62 63 64 65 71 81 82".split()
)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
CARD_PREFIXES = "34569"  # UnionPay 62, domestic 60/9x, Visa 4, Mastercard 5, JCB 35


def id_check_digit(first17: str) -> str:
    """ISO 7064 MOD 11-2 check character of the first 17 digits of a resident identity number."""
    return _ID_CHECK[sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS, strict=True)) % 11]


def _id_shaped(s: str, date: bool = True) -> bool:
    """18 characters starting with a province code and a birth year 1900-2029 (and with `date` a
    valid birth date)."""
    if len(s) != 18 or s[:2] not in _PROVINCES or not 1900 <= (year := int(s[6:10])) <= 2029:
        return False
    if not date:
        return True
    month, day = int(s[10:12]), int(s[12:14])
    if not (1 <= month <= 12 and 1 <= day <= _DAYS[month - 1]):
        return False
    return (month, day) != (2, 29) or calendar.isleap(year)


def is_id_number(s: str) -> bool:
    """A province code, a valid birth date (1900-2029) and the right check digit."""
    return _id_shaped(s) and id_check_digit(s[:17]) == s[17].upper()


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def is_bank_card(digits: str) -> bool:
    """16-19 digits, an issuer prefix, Luhn; an 18-digit number with an identity number's province
    code and birth year (a mistyped identity number) is not taken for a card: random card digits
    have them once in ~250."""
    return (
        16 <= len(digits) <= 19
        and digits[0] in CARD_PREFIXES
        and luhn_ok(digits)
        and not _id_shaped(digits, date=False)
    )


def _is_ipv4(text: str, m: re.Match) -> bool:
    """A dotted quad is an address unless a version word comes right before it; one whose first
    octet has a single digit (1.30.90.5: a table row of decimals run together; 1.2.3.4: a section
    or version number) only with an address word (IP, 地址, 服务器, ...) in the 12 characters before."""
    before = max(0, m.start() - 12)
    if _VERSION_BEFORE.search(text, before, m.start()):
        return False
    if m.group()[1] == ".":
        return _IP_WORD_BEFORE.search(text, before, m.start()) is not None
    return True


def _is_ipv6(s: str) -> bool:
    if "::" not in s and s.count(":") != 7:
        return False  # 12:30:45 is a time
    if sum(1 for group in s.split(":") if group) < 2:
        return False  # ::1, a bare ::
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def _is_figure(token: str | None) -> bool:
    return token is not None and ("." in token or "%" in token or len(token.replace(",", "")) <= 6)


def _in_table_row(text: str, m: Match) -> bool:
    before = _NUMBER_BEFORE.search(text, max(0, m.start - 24), m.start)
    after = _NUMBER_AFTER.match(text, m.end)
    return _is_figure(before and before.group(1)) or _is_figure(after and after.group(1))


def _candidates(text: str) -> list[Match]:
    found: list[Match] = []
    add = found.append
    for m in _ID.finditer(text):
        if is_id_number(m.group().replace(" ", "").replace("-", "") if m.group(1) else m.group()):
            add(Match("id_number", m.start(), m.end()))
    for m in _CARD.finditer(text):
        if is_bank_card(m.group().replace(" ", "").replace("-", "")):
            add(Match("bank_card", m.start(), m.end()))
    for m in _MOBILE.finditer(text):
        add(Match("mobile", m.start(), m.end()))
    phones = [(m.start(), m.end()) for m in _LANDLINE.finditer(text)]
    phones += [m.span(1) for m in _LOCAL_AFTER_KEYWORD.finditer(text)]
    for start, end in phones:
        add(Match("landline", start, end))
        while listed := _LISTED_LOCAL.match(text, end):  # 电话：65091040，65092140
            add(Match("landline", listed.start(1), listed.end()))
            end = listed.end()
    if "@" in text:
        for m in _EMAIL.finditer(text):
            add(Match("email", m.start(), m.end()))
    for m in _IPV4.finditer(text):
        if _is_ipv4(text, m):
            add(Match("ipv4", m.start(), m.end()))
    if ":" in text:
        for m in _IPV6.finditer(text):
            if _is_ipv6(m.group()):
                add(Match("ipv6", m.start(), m.end()))
    for m in _QQ.finditer(text):
        add(Match("qq", m.start(1), m.end(1)))
    for m in _WECHAT.finditer(text):
        value = m.group(2)
        if value.lower() in _WECHAT_NOT_IDS or (m.group(1) is None and value.isalpha()):
            continue  # "微信 Official", "微信WeChat": a word, not an id
        add(Match("wechat", m.start(2), m.end(2)))
    return found


def _excluded_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    if "://" in text or "www." in text:
        spans += [m.span() for m in _URL.finditer(text)]
    if "SBN" in text or "sbn" in text:
        spans += [(m.start(), m.end() + 24) for m in _ISBN.finditer(text)]
    return spans


def find(text: str) -> list[Match]:
    """Personal data in `text`: non-overlapping matches ordered by start."""
    if not _PREFILTER.search(text):
        return []
    found = _candidates(text)
    if not found:
        return []
    excluded = _excluded_spans(text)
    found.sort(key=lambda m: (m.start, _PRIORITY.get(m.kind, len(_PRIORITY)), -m.end))
    out: list[Match] = []
    last_end = 0
    for m in found:
        if m.start < last_end or any(a < m.end and m.start < b for a, b in excluded):
            continue
        if m.kind in _TABLE_KINDS and " " in text and _in_table_row(text, m):
            continue
        out.append(m)
        last_end = m.end
    return out


def redact(text: str, matches: list[Match]) -> str:
    """`text` with each match replaced by its kind's placeholder."""
    parts, pos = [], 0
    for m in matches:
        parts.append(text[pos : m.start])
        parts.append(PLACEHOLDERS[m.kind])
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts)


def redact_text(text: str) -> str:
    """`text` with every match replaced: for text that leaves the stage outside a document, such as
    the excerpt of a rejected record (mode drop or redact)."""
    return redact(text, find(text))


def scrub(lines: list[str], mode: str = DEFAULT_MODE) -> Scrubbed:
    """A document's lines under `mode` (MODES): redact replaces every match with its placeholder;
    drop finds and reports (drop=True when anything was found), leaving the lines as they are; keep
    scans nothing. Lines never gain or lose a line break, so line rules after this still apply."""
    if mode not in MODES:
        raise ValueError(f"pii mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "keep" or not _PREFILTER.search("\n".join(lines)):
        return Scrubbed(lines, {}, False)
    tally = dict.fromkeys(KINDS, 0)
    out = []
    for line in lines:
        matches = find(line)
        for m in matches:
            tally[m.kind] += 1
        out.append(redact(line, matches) if matches and mode == "redact" else line)
    counts = {k: n for k, n in tally.items() if n}
    return Scrubbed(out if mode == "redact" else lines, counts, mode == "drop" and bool(counts))
