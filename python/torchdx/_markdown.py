"""A small, safe Markdown-to-HTML renderer for torchdx's own Markdown reports.

It covers what the engine's Markdown uses (ATX headings, paragraphs, ``**bold**``,
``*emphasis*``, inline code, fenced code blocks, pipe tables, ordered, unordered and
``- [ ]`` task lists, ``[text](https://...)`` links) and nothing else. Every piece of
text is HTML-escaped before any markup is added, raw HTML in the input is shown as text,
and links keep only ``http``, ``https`` and ``mailto`` targets. No third-party
dependency.
"""

from __future__ import annotations

import html
import re
from typing import List

__all__ = ["to_html"]

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+.-]*)\s*$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ULIST = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_OLIST = re.compile(r"^(\s*)(\d{1,9})[.)]\s+(.*)$")
_TASK = re.compile(r"^\[([ xX])\]\s+(.*)$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S)
_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_SAFE_URL = re.compile(r"^(https?:|mailto:)", re.I)


def _esc(s: str) -> str:
    return str(html.escape(s, quote=True))


def _inline(text: str) -> str:
    """Inline Markdown of one block to HTML; the text is escaped first."""
    # Markdown backslash escapes (the engine writes `\|` inside table cells).
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|])", lambda m: "\x00e%d\x00" % ord(m.group(1)), text)
    spans: List[str] = []

    def code(m: "re.Match[str]") -> str:
        body = m.group(2)
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        body = re.sub(r"\x00e(\d+)\x00", lambda e: "\\" + chr(int(e.group(1))), body)
        spans.append("<code>" + _esc(body) + "</code>")
        return "\x00c%d\x00" % (len(spans) - 1)

    text = _CODE_SPAN.sub(code, text)
    out = _esc(text)

    def link(m: "re.Match[str]") -> str:
        label, url = m.group(1), html.unescape(m.group(2))
        if not _SAFE_URL.match(url):
            return m.group(0)
        return '<a href="%s">%s</a>' % (_esc(url), label)

    out = _LINK.sub(link, out)
    out = _STRONG.sub(r"<strong>\1</strong>", out)
    out = _EM.sub(r"<em>\1</em>", out)
    out = re.sub(r"\x00c(\d+)\x00", lambda m: spans[int(m.group(1))], out)
    out = re.sub(r"\x00e(\d+)\x00", lambda m: _esc(chr(int(m.group(1)))), out)
    return out


def _cells(row: str) -> List[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells, cur, i = [], [], 0
    while i < len(row):
        ch = row[i]
        if ch == "\\" and i + 1 < len(row):
            cur.append(row[i : i + 2])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _starts_block(line: str) -> bool:
    return bool(
        not line.strip()
        or _FENCE.match(line)
        or _HEADING.match(line)
        or _ULIST.match(line)
        or _OLIST.match(line)
        or line.lstrip().startswith("|")
    )


def to_html(md: str, css_class: str = "") -> str:
    """Render Markdown to an HTML fragment wrapped in one ``<div>``."""
    lines = md.replace("\r\n", "\n").split("\n")
    out: List[str] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        m = _FENCE.match(line)
        if m:
            indent, fence, lang = m.group(1), m.group(2), m.group(3)
            body: List[str] = []
            i += 1
            while i < n and not (
                lines[i].strip().startswith(fence[0] * len(fence)) and not lines[i].strip().strip(fence[0])
            ):
                body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
                i += 1
            i += 1  # the closing fence (or the end)
            cls = ' class="language-%s"' % _esc(lang) if lang else ""
            out.append("<pre><code%s>%s</code></pre>" % (cls, _esc("\n".join(body) + ("\n" if body else ""))))
            continue
        m = _HEADING.match(line)
        if m:
            level = len(m.group(1))
            out.append("<h%d>%s</h%d>" % (level, _inline(m.group(2)), level))
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < n and _TABLE_SEP.match(lines[i + 1]):
            # GFM: a `\|` in a cell is a pipe, inside code spans too.
            head = [c.replace("\\|", "|") for c in _cells(line)]
            i += 2
            rows = []
            while i < n and lines[i].lstrip().startswith("|"):
                rows.append([c.replace("\\|", "|") for c in _cells(lines[i])])
                i += 1
            t = [
                "<table>",
                "<thead><tr>" + "".join("<th>%s</th>" % _inline(c) for c in head) + "</tr></thead>",
                "<tbody>",
            ]
            for r in rows:
                r = (r + [""] * len(head))[: max(len(head), 1)]
                t.append("<tr>" + "".join("<td>%s</td>" % _inline(c) for c in r) + "</tr>")
            t.append("</tbody></table>")
            out.append("\n".join(t))
            continue
        if _ULIST.match(line) or _OLIST.match(line):
            ordered = bool(_OLIST.match(line)) and not _ULIST.match(line)
            items: List[str] = []
            start = None
            while i < n:
                mu, mo = _ULIST.match(lines[i]), _OLIST.match(lines[i])
                if ordered and mo:
                    if start is None:
                        start = int(mo.group(2))
                    items.append(mo.group(3))
                elif not ordered and mu:
                    items.append(mu.group(2))
                elif items and lines[i].strip() and lines[i].startswith((" ", "\t")):
                    items[-1] += "\n" + lines[i].strip()  # a continuation line
                else:
                    break
                i += 1
            lis = []
            for it in items:
                mt = _TASK.match(it)
                if mt:
                    checked = " checked" if mt.group(1) in "xX" else ""
                    lis.append('<li><input type="checkbox" disabled%s> %s</li>' % (checked, _inline(mt.group(2))))
                else:
                    lis.append("<li>%s</li>" % _inline(it))
            if ordered:
                attr = ' start="%d"' % start if start not in (None, 1) else ""
                out.append("<ol%s>\n%s\n</ol>" % (attr, "\n".join(lis)))
            else:
                out.append("<ul>\n%s\n</ul>" % "\n".join(lis))
            continue
        para = [line.strip()]
        i += 1
        while i < n and not _starts_block(lines[i]):
            para.append(lines[i].strip())
            i += 1
        out.append("<p>%s</p>" % _inline("\n".join(para)))
    cls = ' class="%s"' % _esc(css_class) if css_class else ""
    return "<div%s>\n%s\n</div>" % (cls, "\n".join(out))
