"""The headless Chromium driver the dashboard is tested with (tests/support/browser.py), against a tiny site of
its own: each test fails if the driver gets its part wrong, and none sleeps to wait for the page."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.support.browser import (
    Browser,
    CDPError,
    ConsoleMessage,
    JavaScriptError,
    LaunchError,
    NavigationError,
    Page,
    WaitTimeout,
    browser_processes,
    chromium_path,
    launch,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
COOKIE = "browser-test-session"


def _html(body: str) -> web.Response:
    return web.Response(content_type="text/html", text=f"<!doctype html><html><body>{body}</body></html>")


async def _home(_: web.Request) -> web.Response:
    # The element arrives 200 ms after the script runs, after the load event: only waiting sees it.
    return _html(
        "<h1>home</h1><script>setTimeout(() => {"
        " const late = document.createElement('p'); late.id = 'late'; late.textContent = 'arrived';"
        " document.body.append(late); }, 200);</script>"
    )


async def _denied(_: web.Request) -> web.Response:
    return web.Response(status=401, text="denied: no session")


async def _denied_empty(_: web.Request) -> web.Response:
    return web.Response(status=401)


async def _framed(_: web.Request) -> web.Response:
    return _html("<iframe src='/denied'></iframe>")


async def _set(_: web.Request) -> web.Response:
    response = _html("<p>cookie set</p>")
    response.set_cookie(COOKIE, "session-1", httponly=True, samesite="Strict", path="/")
    return response


async def _login(_: web.Request) -> web.Response:
    """Like the dashboard's token URL: a redirect that sets the session cookie on the way."""
    response = web.Response(status=302, headers={"Location": "/check"})
    response.set_cookie(COOKIE, "from-login", httponly=True, samesite="Strict", path="/")
    return response


async def _check(request: web.Request) -> web.Response:
    return _html(f"<pre id='cookie'>{request.cookies.get(COOKIE, 'none')}</pre>")


async def _noisy(_: web.Request) -> web.Response:
    return _html(
        "<script>console.error('dashboard broke', 42)</script><script>throw new Error('uncaught boom')</script>"
    )


async def _blank(_: web.Request) -> web.Response:
    return _html("")


async def _blink(_: web.Request) -> web.Response:
    # Once a wait has checked (it sets window.polled), an element is added and removed again in the next
    # microtask: no animation frame ever sees it, only a MutationObserver does.
    return _html(
        "<script>const timer = setInterval(() => { if (!window.polled) return; clearInterval(timer);"
        " const blink = document.createElement('p'); blink.id = 'blink'; document.body.append(blink);"
        " queueMicrotask(() => blink.remove()); }, 10);</script>"
    )


async def _ticking(_: web.Request) -> web.Response:
    # State that changes without touching the DOM: only a check on animation frames sees it.
    return _html("<script>window.ticks = 0; setInterval(() => { window.ticks += 1; }, 20);</script>")


async def _moving(_: web.Request) -> web.Response:
    return _html("<p>leaving</p><script>setTimeout(() => { location.href = '/'; }, 100);</script>")


@pytest.fixture
async def site() -> AsyncIterator[str]:
    app = web.Application()
    for path, handler in {
        "/": _home,
        "/denied": _denied,
        "/denied-empty": _denied_empty,
        "/framed": _framed,
        "/set": _set,
        "/login": _login,
        "/check": _check,
        "/noisy": _noisy,
        "/blank": _blank,
        "/blink": _blink,
        "/ticking": _ticking,
        "/moving": _moving,
    }.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    async with launch(tmp_path) as running:
        yield running


@pytest.fixture
async def page(browser: Browser) -> Page:
    return await browser.new_page()


async def test_goto_returns_the_status_of_the_document(page: Page, site: str) -> None:
    assert await page.goto(site + "/") == 200
    assert await page.goto(site + "/denied") == 401
    assert await page.evaluate("document.body.innerText") == "denied: no session"
    # With an empty body Chromium shows an error page of its own, but the server's status is still the answer.
    assert await page.goto(site + "/denied-empty") == 401
    assert await page.goto(site + "/no-such-page") == 404
    assert await page.evaluate("location.pathname") == "/no-such-page"
    # The frame's 401 arrives after the page's 200: the status is the navigated document's, not the last one.
    assert await page.goto(site + "/framed") == 200


async def test_goto_raises_when_nothing_answers(page: Page) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound but not listening: connections to it are refused
        port = bound.getsockname()[1]
        with pytest.raises(NavigationError, match="ERR_CONNECTION_REFUSED"):
            await page.goto(f"http://127.0.0.1:{port}/")


async def test_a_cookie_set_by_one_navigation_is_sent_on_the_next(page: Page, site: str) -> None:
    assert await page.goto(site + "/check") == 200
    assert await page.evaluate("document.querySelector('#cookie').textContent") == "none"
    assert await page.goto(site + "/set") == 200
    assert await page.goto(site + "/check") == 200
    assert await page.evaluate("document.querySelector('#cookie').textContent") == "session-1"


async def test_a_redirect_that_sets_a_cookie_gives_the_final_status(browser: Browser, site: str) -> None:
    page = await browser.new_page()
    assert await page.goto(site + "/login") == 200
    assert await page.evaluate("[location.pathname, document.querySelector('#cookie').textContent]") == [
        "/check",
        "from-login",
    ]
    # Pages of one browser share its cookies.
    other = await browser.new_page()
    await other.goto(site + "/check")
    assert await other.evaluate("document.querySelector('#cookie').textContent") == "from-login"


async def test_wait_for_sees_an_element_added_after_the_load(page: Page, site: str) -> None:
    await page.goto(site + "/")
    assert await page.wait_for("document.querySelector('#late')?.textContent") == "arrived"
    assert page.console == []


async def test_wait_for_rechecks_on_dom_mutations(page: Page, site: str) -> None:
    await page.goto(site + "/blink")
    assert await page.wait_for("(window.polled = true, document.querySelector('#blink')?.id)", 5) == "blink"
    assert await page.evaluate("document.querySelector('#blink')") is None, "the element was to be gone"


async def test_wait_for_rechecks_on_animation_frames(page: Page, site: str) -> None:
    await page.goto(site + "/ticking")
    assert await page.wait_for("window.ticks >= 5 && window.ticks", 5) >= 5


async def test_wait_for_goes_on_in_the_document_a_navigation_brings(page: Page, site: str) -> None:
    await page.goto(site + "/moving")
    assert await page.wait_for("document.querySelector('#late')?.textContent") == "arrived"
    assert await page.evaluate("location.pathname") == "/"


async def test_wait_for_times_out_naming_the_expression(page: Page, site: str) -> None:
    await page.goto(site + "/blank")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(WaitTimeout, match=r"after 0\.3 s: 'window\.never === true' stayed falsy") as raised:
        await page.wait_for("window.never === true", timeout=0.3)
    assert 0.3 <= loop.time() - started < 5
    assert isinstance(raised.value, TimeoutError)
    # A check that throws counts as "not yet", and the error says what it threw.
    with pytest.raises(WaitTimeout, match=r"(?s)#missing.*last error: TypeError"):
        await page.wait_for("document.querySelector('#missing').textContent", timeout=0.2)
    # A syntax error is no reason to wait: it fails at once.
    with pytest.raises(JavaScriptError, match="SyntaxError"):
        await page.wait_for("window.(", timeout=30)


async def test_evaluate_returns_values_and_raises_what_the_page_throws(page: Page, site: str) -> None:
    await page.goto(site + "/blank")
    assert await page.evaluate("1 + 2") == 3
    assert await page.evaluate("({rows: [1, 'two', null], ok: true})") == {
        "rows": [1, "two", None],
        "ok": True,
    }
    assert await page.evaluate("new Promise((resolve) => setTimeout(() => resolve('later'), 10))") == "later"
    assert await page.evaluate("undefined") is None
    assert await page.evaluate("-Infinity") == float("-inf")
    with pytest.raises(JavaScriptError, match="Error: boom"):
        await page.evaluate("(() => { throw new Error('boom'); })()")
    with pytest.raises(JavaScriptError, match="rejected on purpose"):
        await page.evaluate("Promise.reject(new Error('rejected on purpose'))")
    assert page.console == [], "what evaluate throws is its caller's, not an uncaught exception of the page"


async def test_a_cdp_error_names_the_method(page: Page) -> None:
    with pytest.raises(CDPError, match=r"^Page\.noSuchMethod failed: .*wasn't found") as raised:
        await page.send("Page.noSuchMethod")
    assert raised.value.method == "Page.noSuchMethod"
    assert raised.value.code == -32601


async def test_screenshot_writes_a_png_of_the_viewport(browser: Browser, site: str, tmp_path: Path) -> None:
    for width, height in ((1280, 800), (640, 480)):
        page = await browser.new_page(width=width, height=height)
        await page.goto(site + "/")
        assert await page.evaluate("[innerWidth, innerHeight]") == [width, height]
        shot = tmp_path / "shots" / f"{width}x{height}" / "home.png"
        await page.screenshot(shot)
        data = shot.read_bytes()
        assert data[:8] == PNG_SIGNATURE
        assert 500 < len(data) < 10_000_000
        # The IHDR chunk comes first: its width and height are the viewport's.
        assert data[12:16] == b"IHDR"
        assert struct.unpack(">II", data[16:24]) == (width, height)


async def test_console_collects_errors_and_uncaught_exceptions(page: Page, site: str) -> None:
    await page.goto(site + "/noisy")
    # Both ran before the load event, and the driver hears the page's events in order.
    assert page.console[0] == ConsoleMessage("error", "dashboard broke 42")
    assert len(page.console) == 2
    assert page.console[1].type == "exception"
    assert "Error: uncaught boom" in page.console[1].text


async def test_the_browser_and_its_helpers_end_with_launch(tmp_path: Path) -> None:
    async with launch(tmp_path) as browser:
        page = await browser.new_page()
        assert await page.goto("about:blank") is None, "no HTTP, no status"
        running = browser_processes(browser.pid, tmp_path)
        assert browser.pid in running and len(running) > 1, "renderers and helpers, besides the browser"
    assert browser.process.returncode is not None
    assert browser_processes(browser.pid, tmp_path) == []
    assert any((tmp_path / "profile").iterdir()), "the profile the browser was given holds its state"


def test_chromium_path_takes_chromium_from_the_environment_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHROMIUM", "/opt/some/chromium")
    assert chromium_path() == "/opt/some/chromium"


async def test_launch_skips_without_a_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert chromium_path() is None
    with pytest.raises(pytest.skip.Exception, match=r"chromium.*apt-get install -y chromium"):
        async with launch(tmp_path):
            raise AssertionError("launched without a browser")


def _fake_browser(folder: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = folder / "fake-chromium"
    fake.write_text("#!/bin/sh\n" + script)
    fake.chmod(0o755)
    monkeypatch.setenv("CHROMIUM", str(fake))


async def test_launch_reports_a_browser_that_exits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_browser(tmp_path, "echo 'fake: cannot open display' >&2\nexit 3\n", monkeypatch)
    with pytest.raises(LaunchError, match=r"(?s)exited with 3 .*fake: cannot open display"):
        async with launch(tmp_path):
            raise AssertionError("launched a browser that exited")


async def test_launch_reports_and_ends_a_browser_that_never_listens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "pid"
    _fake_browser(tmp_path, f"echo $$ > {pid_file}\necho 'fake: starting' >&2\nexec sleep 60\n", monkeypatch)
    with pytest.raises(LaunchError, match=r"(?s)within 0\.5 s.*fake: starting"):
        async with launch(tmp_path, startup_timeout=0.5):
            raise AssertionError("launched a browser that never listened")
    pid = int(pid_file.read_text())
    assert browser_processes(pid, tmp_path) == []
