"""Page models to HTML: the API's view of one judgment, and the fragments of the run report.

Everything a trace or a judge wrote is untrusted. jinja2 autoescapes every value;
the pages carry no style attribute and no script but the report's one fixed script,
and a Content-Security-Policy allowing exactly the fixed stylesheet and script (by
hash) and nothing else: no image, font, frame or connection, so even an escaping bug
could neither run code nor make a request.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections.abc import Iterable, Iterator
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.view.model import TONES, Page

_TEMPLATES = files("judge_service.view") / "templates"
CSS = (_TEMPLATES / "view.css").read_text(encoding="utf-8")
SCRIPT = (_TEMPLATES / "report.js").read_text(encoding="utf-8")


def csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


_LOCKED = "default-src 'none'; base-uri 'none'; form-action 'none'"
# In the page's <meta> too, so a saved copy keeps it; frame-ancestors only works (and
# Chromium complains about it otherwise) in the header, which the API adds.
_PAGE_META_CSP = f"{_LOCKED}; style-src {csp_hash(CSS)}"
PAGE_CSP = f"{_PAGE_META_CSP}; frame-ancestors 'none'"
REPORT_CSP = f"{_LOCKED}; style-src {csp_hash(CSS)}; script-src {csp_hash(SCRIPT)}"


def text(value: Any) -> Markup:
    """Escape, and keep a carriage return a character: a raw CR in HTML text is turned into
    a line feed by the parser, so CRLF split across two pieces would show two line breaks."""
    return Markup(str(escape(value)).replace("\r", "&#13;"))


def trace_html(page: Page) -> Markup:
    """The painted text: one element per piece (written here, not in the template: a
    report renders millions of pieces). Its position shows on hover from data-t (CSS);
    span and rejection details are in the title."""
    parts = []
    for piece in page.pieces:
        classes = f"p {piece.tone} l{piece.level}" if piece.span is not None else ""
        if piece.evidence:
            classes += " ev"
        if piece.rejected:
            classes += " rj"
        attrs = f' class="{classes.strip()}"' if classes else ""
        attrs += f' data-t="{piece.first_token}"'
        if piece.span is not None:
            attrs += f' data-s="{piece.span}"'
        if piece.title:
            attrs += f' title="{escape(piece.title)}"'
        body = str(escape(piece.text))
        if "\r" in body:
            body = body.replace("\r", "&#13;")  # as `text` does
        parts.append(f"<span{attrs}>{body}</span>")
    return Markup("".join(parts))


_ENV = Environment(
    loader=PackageLoader("judge_service.view", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=StrictUndefined,
)
_ENV.filters["text"] = text
_ENV.globals["trace_html"] = trace_html
_ENV.globals["legend"] = [
    (TONES[label], f"{label} {score:+g}") for label, score in DEFAULT_LABEL_SCORES.items()
]


def page_html(page: Page) -> str:
    """A whole HTML document for one judgment (the API's view); serve it with `PAGE_CSP`."""
    return _ENV.get_template("page.html.j2").render(page=page, csp=_PAGE_META_CSP, css=Markup(CSS))


def render_page(template: str, **values: Any) -> str:
    """A whole document from `template`, with the page's stylesheet and CSP meta; serve it
    with `PAGE_CSP`."""
    return _ENV.get_template(template).render(csp=_PAGE_META_CSP, css=Markup(CSS), **values)


def fragment_html(page: Page) -> str:
    """The body of one judgment's page, for the run report to show when it is opened."""
    return _ENV.get_template("fragment.html.j2").render(page=page)


def packed(fragment: str) -> str:
    """A fragment as the report stores it: gzip, then base64 (a third of the size; the
    page's script inflates it with the browser's DecompressionStream when it is opened).
    Base64 holds no "<", so no data can end or derail its raw-text element."""
    return base64.b64encode(gzip.compress(fragment.encode("utf-8"), 6, mtime=0)).decode("ascii")


def report_chunks(report: Any, fragments: Iterable[tuple[int, str]]) -> Iterator[str]:
    """The run report document in chunks (streamed to the file: 10,000 traces never sit in
    memory as one string); `fragments` are (row index, `fragment_html`)."""
    template = _ENV.get_template("report.html.j2")
    blocks = ((index, packed(f)) for index, f in fragments)
    return template.generate(
        report=report,
        blocks=blocks,
        csp=REPORT_CSP,
        css=Markup(CSS),
        script=Markup(SCRIPT),
    )
