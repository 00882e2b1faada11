"""The few HTML pieces the report is made of, every value escaped on the way in.

Text reaches a page only through ``text`` (``html.escape`` with quotes), so a suite description, an
arm label or an error message from a stored file can never become markup; links and image sources are
relative paths, URL-quoted and then escaped. No script, no external stylesheet: a page opens from disk.
"""
from __future__ import annotations

import html
from typing import Sequence
from urllib.parse import quote

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1b1b1b; max-width: 80em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
code, pre { font-family: ui-monospace, monospace; font-size: 0.9em; }
td code { word-break: break-all; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
.pass { color: #176b2c; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.other { color: #7a5c00; } img { max-width: 100%; border: 1px solid #ddd; }
"""


def text(value: object) -> str:
    """Any value as HTML text: nothing in it can open a tag or an attribute."""
    return html.escape(str(value), quote=True)


def link(href: str, label: object) -> str:
    return f'<a href="{text(quote(href))}">{text(label)}</a>'


def image(src: str, alt: object) -> str:
    return f'<img src="{text(quote(src))}" alt="{text(alt)}">'


def result_cell(result: str) -> str:
    """A claim's result, coloured by its outcome (the words stay: colour only repeats them)."""
    word = result.split(" ", 1)[0].upper()
    kind = {"PASS": "pass", "FAIL": "fail"}.get(word, "other")
    return f'<span class="{kind}">{text(result)}</span>'


def table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    """A table of cells that are already HTML (made by ``text`` or the helpers above)."""
    head = "".join(f"<th>{text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    title = f"<caption>{text(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str) -> str:
    """A whole document: UTF-8, the inline style, the title and ``body`` (already HTML)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
