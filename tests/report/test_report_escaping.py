"""The HTML report of a study whose names are hostile: every name is shown as text, none becomes
markup, and the plots are drawn with the names as written (a ``$...$`` name is not mathtext).

The study comes the way a user gets one: written by the store's own writers with hostile hardware,
target, draft and study names (tests/profile_factory.py), exported as JSON, given hostile values in
its per-concurrency table, and imported with ``autotune profiles import``.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

import profile_factory as factory
from autotune import report
from autotune.cli import cli
from autotune.store import open_database

MARKUP = "</script><script>alert(1)</script><img src=x onerror=alert(1)><!-- -->"
NAMES = {
    "study": f"study {MARKUP} 'single' \"double\" &amp; &",
    "hardware": f"hw <b onmouseover=alert(1)>bold</b> {MARKUP}",
    "target": f"target {MARKUP}",
    # Mathtext that fails to draw if parsed: an unknown command between dollars.
    "draft": f"draft $\\undefinedcommand$ $x^2$ {MARKUP}",
}
TABLE_VALUE = f"{MARKUP} \" ' &"
# Every tag the report writes; an injected name would add others (script) or attributes (on*).
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b", "br", "table", "tr", "th", "td",
        "figure", "img", "figcaption", "a"}


class Page(HTMLParser):
    """The tags, attributes and text of a page (character references resolved, as a browser does)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.comments: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """The report of the imported hostile study: (HTML text, its folder)."""
    folder = tmp_path_factory.mktemp("hostile-report")
    url = f"sqlite:///{folder / 'autotune.db'}"
    with open_database(url) as database, database.session() as session:
        hw = factory.hardware(session, NAMES["hardware"])
        target = factory.model(session, NAMES["target"], "tttt000011112222")
        draft = factory.model(session, NAMES["draft"], "dddd000011112222", role="draft")
        profile_id = factory.study(session, "source-study", hw, target, draft, confirm=True).id
    runner = CliRunner()
    exported = folder / "profile.json"
    result = runner.invoke(cli, ["export", str(profile_id), "--format", "json", "-o", str(exported), "--db", url])
    assert result.exit_code == 0, result.output
    document = json.loads(exported.read_text())
    document["profile"]["study"]["name"] = NAMES["study"]
    for row in document["profile"]["per_concurrency"]:
        row.update(label=TABLE_VALUE, tied=[TABLE_VALUE], note=TABLE_VALUE, acceptance_rate=TABLE_VALUE,
                   trials=TABLE_VALUE)
    document["profile"]["per_concurrency"][0]["concurrency"] = TABLE_VALUE
    exported.write_text(json.dumps(document))
    result = runner.invoke(cli, ["profiles", "import", str(exported), "--db", url])
    assert result.exit_code == 0, result.output
    html_path = report.write_report(url, NAMES["study"], folder / "report")
    return html_path.read_text(encoding="utf-8"), html_path.parent


def test_no_name_becomes_markup(page: tuple[str, Path]) -> None:
    html, _ = page
    parsed = Page(html)
    assert {tag for tag, _ in parsed.tags} <= TAGS
    assert not [(tag, name) for tag, attrs in parsed.tags for name in attrs if name.startswith("on")]
    assert parsed.comments == []
    for tag, attrs in parsed.tags:
        if tag == "img":
            assert attrs["src"].startswith("data:image/png;base64,")
        if tag == "a":
            assert attrs["href"].endswith(".png") and ":" not in attrs["href"]
    assert MARKUP not in html and "<script" not in html.lower() and "<img src=x" not in html


def test_every_name_is_shown_as_written(page: tuple[str, Path]) -> None:
    html, _ = page
    text = "".join(Page(html).text)
    for name in (*NAMES.values(), TABLE_VALUE):
        assert name in text, name
    assert f"Study {NAMES['study']}" in text


def test_plots_are_drawn_with_a_dollar_name(page: tuple[str, Path]) -> None:
    _, folder = page
    assert {p.stem for p in folder.glob("*.png")} >= {"throughput_vs_concurrency", "pareto_front", "speedup_vs_depth"}
