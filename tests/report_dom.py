"""Read a report page (``sinks.presentation.report``) as a browser test and a unit test both need
to: the text under each element with an ``id``, the ``data-field`` rows, and the images' sources and
sizes (the standard library's HTML parser; a rendered DOM from Chromium reads the same way)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {"img", "meta", "br", "hr", "input", "link", "col", "area", "base", "source", "wbr"}


@dataclass
class Page:
    """What a page shows: text by element id, status rows by field name, images by id
    (their attributes), every tag name seen."""

    text: dict[str, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)
    images: dict[str, dict[str, str]] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)
    rows: dict[str, int] = field(default_factory=dict)  # table id -> rows (the header's too)


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.open: list[tuple[str, str | None, str | None]] = []  # (tag, id, data-field)
        self.tables: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.page.tags.add(tag)
        if tag == "img" and a.get("id"):
            self.page.images[a["id"]] = {k: v or "" for k, v in attrs}
        if tag == "table":
            self.tables.append(a.get("id"))
        if tag == "tr" and self.tables and self.tables[-1]:
            tid = self.tables[-1]
            self.page.rows[tid] = self.page.rows.get(tid, 0) + 1
        if tag in VOID:
            return
        self.open.append((tag, a.get("id"), a.get("data-field")))
        for name in (a.get("id"), a.get("data-field")):
            if name is not None:
                self.page.text.setdefault(name, "")

    def handle_endtag(self, tag):
        if tag == "table" and self.tables:
            self.tables.pop()
        while self.open:
            t, _, _ = self.open.pop()
            if t == tag:
                break

    def handle_data(self, data):
        for _, id_, data_field in self.open:
            if id_ is not None:
                self.page.text[id_] += data
            if data_field is not None:
                self.page.fields[data_field] = self.page.fields.get(data_field, "") + data


def read_page(html_text: str) -> Page:
    """The page ``html_text`` shows."""
    reader = _Reader()
    reader.feed(html_text)
    reader.close()
    return reader.page


def pixels_of(png: str, color: str) -> int:
    """How many pixels of the picture ``png`` are ``color`` (#rrggbb), give or take the
    anti-aliasing."""
    import matplotlib.image as mpimg
    import numpy as np

    image = mpimg.imread(png)[..., :3]
    rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return int((np.abs(image - rgb).max(axis=-1) < 0.04).sum())
