"""The documentation site as a reader gets it: built with mkdocs, every page of the navigation is there with its
title, every link inside the site reaches a page and an anchor that exist, every code block of the sources is
rendered as code, and no Markdown is left unrendered in the text."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import pytest
import yaml

from tests.support.processes import REPO


class Page(HTMLParser):
    """What one built page holds: ids, links, headings, code blocks and the text outside code."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.h1: list[str] = []
        self.code_blocks = 0
        self.text: list[str] = []
        self._open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(str(attributes["id"]))
        if tag == "a" and attributes.get("href"):
            self.links.append(str(attributes["href"]))
        if tag == "pre":
            self.code_blocks += 1
        self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        while self._open and self._open.pop() != tag:
            pass

    def handle_data(self, data: str) -> None:
        if "h1" in self._open:
            self.h1.append(data.strip())
        if not {"code", "pre", "script", "style"} & set(self._open):
            self.text.append(data)


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    return []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None:
        reason = 'mkdocs is not installed (pip install -e ".[docs]")'
        print(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    return out


def _built(site: Path, source: str) -> Path:
    stem = source.removesuffix(".md")
    return site / "index.html" if stem == "index" else site / stem / "index.html"


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def test_every_page_renders_with_its_code_and_no_markdown_left(site: Path) -> None:
    nav = _nav_pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    assert "getting-started.md" in nav and "user-guide.md" in nav
    for source in nav:
        built = _built(site, source)
        assert built.exists(), f"{source} was not built"
        page = _parse(built)
        markdown = (REPO / "docs" / source).read_text(encoding="utf-8")
        title = markdown.splitlines()[0].removeprefix("# ").strip()
        assert title in page.h1, f"{source}: title {title!r} not rendered"
        fences = len(re.findall(r"^```", markdown, re.MULTILINE)) // 2
        assert page.code_blocks >= fences, (
            f"{source}: {fences} code blocks written, {page.code_blocks} rendered"
        )
        text = "".join(page.text)
        for leftover in ("```", "](", "**"):
            assert leftover not in text, f"{source}: unrendered Markdown {leftover!r} in the text"


def test_every_link_inside_the_site_reaches_a_page_and_anchor(site: Path) -> None:
    pages = {path: _parse(path) for path in site.rglob("*.html")}
    checked = 0
    for path, page in pages.items():
        base = "/" + path.relative_to(site).as_posix()
        for link in page.links:
            if re.match(r"^[a-z]+:", link) or link.startswith("//"):
                continue  # another site
            target, anchor = urldefrag(urljoin(base, link))
            resolved = site / target.lstrip("/")
            if resolved.is_dir() or target.endswith("/"):
                resolved = resolved / "index.html"
            assert resolved in pages or resolved.exists(), f"{base}: link {link} reaches nothing"
            if anchor and resolved in pages:
                assert anchor in pages[resolved].ids, f"{base}: link {link}: no #{anchor} there"
            checked += 1
    assert checked > 50, f"only {checked} links inside the site: is the navigation rendered?"
