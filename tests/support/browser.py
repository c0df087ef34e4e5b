"""A small driver for headless Chromium over the Chrome DevTools Protocol, for tests of the web dashboard.

Written on aiohttp's websocket client so the tests need nothing beyond the project's own dependencies and a
browser from the system's packages (Debian's ``chromium``; ``.ci/run`` installs it). Without a browser,
:func:`launch` skips the test rather than failing it.

One websocket reaches the browser; every page is a target attached with ``flatten: true``, so its commands and
events travel over that same socket tagged with a ``sessionId``. One reader task hands each response to the
future of its command id and each event to the page of its session.

Nothing here sleeps to wait for state: navigation waits for the browser's own events, and :meth:`Page.wait_for`
runs its polling inside the page, on animation frames and DOM mutations.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import os
import re
import shutil
import signal
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

JSONObject = dict[str, Any]
EventHandler = Callable[[str, JSONObject], None]

# Names the browser goes by on Debian (chromium), other distributions (chromium-browser) and Google's builds.
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
# --no-sandbox: the tests run as root in CI, where Chromium refuses to start sandboxed. --disable-dev-shm-usage:
# containers often have a small /dev/shm, which crashes renderers. Port 0: the browser picks a free port and says
# which on stderr, so parallel runs never collide.
BROWSER_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-port=0",
)
LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
# How many of the browser's last stderr lines an error quotes.
STDERR_TAIL = 40
# How long the browser gets to exit on SIGTERM before its whole process group is killed.
EXIT_GRACE = 10.0
# A command the browser has not answered in this long is reported rather than awaited forever.
COMMAND_TIMEOUT = 30.0
# A 401 with `WWW-Authenticate: Basic` (or Digest) asks for credentials; headless Chromium has nobody to ask.
AUTH_HINT = " (the server asked for Basic/Digest credentials, which headless Chromium cancels)"
# CDP errors that mean the page's JavaScript context went away under a command (the page navigated).
CONTEXT_LOST = (
    "Execution context was destroyed",
    "Cannot find default execution context",
    "Cannot find context",
    "Inspected target navigated or closed",
)


class BrowserError(RuntimeError):
    """Something went wrong in the browser or in talking to it."""


class LaunchError(BrowserError):
    """The browser did not start: it exited, or never said where it listens."""


class BrowserClosed(BrowserError):
    """The connection to the browser ended (the browser crashed or was closed) while a command waited."""


class CDPError(BrowserError):
    """The browser answered a command with an error."""

    def __init__(self, method: str, code: int, message: str, data: str | None = None) -> None:
        detail = f" ({data})" if data else ""
        super().__init__(f"{method} failed: {message}{detail} [code {code}]")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class JavaScriptError(BrowserError):
    """JavaScript evaluated in the page threw (or its promise rejected)."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class NavigationError(BrowserError):
    """A navigation failed before it produced a document (connection refused, DNS, aborted, ...)."""


class WaitTimeout(BrowserError, TimeoutError):
    """:meth:`Page.wait_for`'s expression stayed falsy for the whole timeout."""


@dataclass(frozen=True)
class ConsoleMessage:
    """A console call (``type`` is ``log``, ``error``, ``warning``, ...) or an uncaught exception (``exception``)."""

    type: str
    text: str


def chromium_path() -> str | None:
    """The browser to run: ``$CHROMIUM`` when set (an explicit choice, used as given), else the first of the usual
    names found on ``PATH``."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit
    for name in BROWSER_NAMES:
        if (found := shutil.which(name)) is not None:
            return found
    return None


class Connection:
    """The one websocket to the browser: numbered commands, their answers, and events routed by session."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse, stderr: _Stderr) -> None:
        self._socket = socket
        self._stderr = stderr
        self._next_id = 0
        self._pending: dict[int, tuple[str, asyncio.Future[JSONObject]]] = {}
        self._subscribers: dict[str | None, list[EventHandler]] = {}
        self._closed: BaseException | None = None
        self._reader = asyncio.create_task(self._read(), name="CDP reader")

    async def send(
        self,
        method: str,
        params: JSONObject | None = None,
        session_id: str | None = None,
        within: float = COMMAND_TIMEOUT,
    ) -> JSONObject:
        """Send one command and return its ``result``; a CDP error raises :class:`CDPError`."""
        if self._closed is not None:
            raise BrowserClosed(f"{method}: {self._closed}")
        self._next_id += 1
        command_id = self._next_id
        message: JSONObject = {"id": command_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        answer: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._pending[command_id] = (method, answer)
        try:
            await self._socket.send_str(json.dumps(message))
            async with asyncio.timeout(within):
                return await answer
        except TimeoutError:
            raise TimeoutError(f"the browser did not answer {method} within {within} s") from None
        finally:
            self._pending.pop(command_id, None)

    def subscribe(self, session_id: str | None, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler(method, params)`` for each event of ``session_id`` (``None``: the browser's own);
        returns the function that unsubscribes it."""
        handlers = self._subscribers.setdefault(session_id, [])
        handlers.append(handler)
        return lambda: handlers.remove(handler) if handler in handlers else None

    async def _read(self) -> None:
        reason: BaseException = BrowserClosed("the browser closed the DevTools connection")
        try:
            async for frame in self._socket:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                self._dispatch(json.loads(frame.data))
        except Exception as error:
            reason = error
            raise
        finally:
            self._closed = reason
            tail = self._stderr.tail()
            for method, answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(
                        BrowserClosed(f"{method}: {reason}; the browser's last lines:\n{tail}")
                    )

    def _dispatch(self, message: JSONObject) -> None:
        if "id" in message:
            method, answer = self._pending.get(message["id"], ("", None))
            if answer is None or answer.done():
                return  # its sender timed out or was cancelled
            if "error" in message:
                error = message["error"]
                answer.set_exception(
                    CDPError(method, error.get("code", 0), error.get("message", ""), error.get("data"))
                )
            else:
                answer.set_result(message.get("result", {}))
            return
        # A handler that fails is a bug of this module: it ends the reader, and every waiting command says why.
        for handler in list(self._subscribers.get(message.get("sessionId"), ())):
            handler(message["method"], message.get("params", {}))

    async def close(self) -> None:
        """Close the socket; the reader then ends, failing whatever still waited for an answer."""
        await self._socket.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader


class _Stderr:
    """Drains the browser's stderr for its whole life (a full pipe would block the browser), keeping the last
    lines for error messages and finding the DevTools endpoint among the first."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream
        self._lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._endpoint: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._drain(), name="chromium stderr")

    async def _drain(self) -> None:
        try:
            while True:
                try:
                    line = await self._stream.readline()
                except ValueError:  # longer than the stream's limit: dropped, the endpoint line is short
                    self._lines.append("[a line too long to keep]")
                    continue
                if not line:
                    break
                text = line.decode(errors="replace").rstrip()
                self._lines.append(text)
                if not self._endpoint.done() and (found := LISTENING.search(text)):
                    self._endpoint.set_result(found.group(1))
        finally:
            if not self._endpoint.done():
                self._endpoint.set_exception(EOFError("stderr closed"))

    async def endpoint(self, within: float) -> str:
        return await asyncio.wait_for(asyncio.shield(self._endpoint), within)

    def tail(self) -> str:
        return "\n".join(self._lines) or "(nothing on stderr)"


class Browser:
    """A running headless Chromium: opens pages, all in its default context so they share cookies."""

    def __init__(self, connection: Connection, process: asyncio.subprocess.Process, endpoint: str) -> None:
        self.connection = connection
        self.process = process
        self.endpoint = endpoint

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, method: str, params: JSONObject | None = None) -> JSONObject:
        """A browser-level command (``Browser.getVersion``, ``Target.*``, ...)."""
        return await self.connection.send(method, params)

    async def new_page(self, width: int = 1280, height: int = 800) -> Page:
        """A new tab showing about:blank, with a fixed viewport so screenshots and layout are reproducible."""
        created = await self.send("Target.createTarget", {"url": "about:blank"})
        target_id: str = created["targetId"]
        attached = await self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        page = Page(self.connection, target_id, attached["sessionId"])
        await page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        for domain in ("Page", "Runtime", "Network"):
            await page.send(f"{domain}.enable")
        return page


class Page:
    """One tab, driven through its own CDP session."""

    def __init__(self, connection: Connection, target_id: str, session_id: str) -> None:
        self.connection = connection
        self.target_id = target_id
        self.session_id = session_id
        # Console calls and uncaught exceptions, in the order the page made them: tests assert it stayed clean.
        self.console: list[ConsoleMessage] = []
        self._contexts_created = 0
        self._context_created = asyncio.Event()
        # Subscribed before any domain is enabled, so no event of this session is missed.
        connection.subscribe(session_id, self._on_event)

    async def send(
        self, method: str, params: JSONObject | None = None, within: float = COMMAND_TIMEOUT
    ) -> JSONObject:
        """A command to this page's session (``Input.dispatchMouseEvent``, ...), for what the helpers lack."""
        return await self.connection.send(method, params, self.session_id, within)

    def _on_event(self, method: str, params: JSONObject) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(_describe(argument) for argument in params.get("args", []))
            self.console.append(ConsoleMessage(params.get("type", "log"), text))
        elif method == "Runtime.exceptionThrown":
            self.console.append(ConsoleMessage("exception", _exception_text(params["exceptionDetails"])))
        elif method == "Runtime.executionContextCreated":
            self._contexts_created += 1
            self._context_created.set()

    # goto and wait_for take `timeout=` (the name the dashboard's tests are written against) where this
    # repository's helpers usually say `within=`.
    async def goto(self, url: str, timeout: float = 15) -> int | None:  # noqa: ASYNC109
        """Navigate, wait for the new document's load event, and return the HTTP status of that document
        (``None`` for a document that came over no HTTP, such as ``about:blank`` or a ``data:`` URL).

        The status comes from the ``Network.responseReceived`` of the navigation's own loader, so it is the
        document's (after redirects), not a subresource's; an error status (401, 404, 500) loads like any page.
        The load event counted is the first after the document committed, never the previous page's.
        """
        over_http = urllib.parse.urlsplit(url).scheme in ("http", "https")
        statuses: dict[str, int] = {}  # loaderId -> status of its document response
        committed: set[str] = set()  # loaderIds of main-frame documents committed so far
        loaded: set[str] = set()  # loaderIds committed before a load event
        changed = asyncio.Event()

        def watch(method: str, params: JSONObject) -> None:
            if method == "Network.responseReceived" and params.get("type") == "Document":
                statuses[params["loaderId"]] = int(params["response"]["status"])
            elif method == "Page.frameNavigated" and "parentId" not in params["frame"]:
                committed.add(params["frame"]["loaderId"])
            elif method == "Page.loadEventFired":
                loaded.update(committed)
            else:
                return
            changed.set()

        unsubscribe = self.connection.subscribe(self.session_id, watch)
        loader = ""
        try:
            async with asyncio.timeout(timeout):
                navigated = await self.send("Page.navigate", {"url": url}, within=timeout)
                loader = navigated.get("loaderId", "")
                error = navigated.get("errorText")
                if not loader:
                    raise NavigationError(f"{url}: a same-document navigation has no response of its own")
                # Chromium shows its own error page for an error status with an empty body and reports that as
                # a failed navigation; the server still answered, so the status is what the test wants.
                if error and not (error == "net::ERR_HTTP_RESPONSE_CODE_FAILURE" and loader in statuses):
                    hint = AUTH_HINT if error == "net::ERR_INVALID_AUTH_CREDENTIALS" else ""
                    raise NavigationError(f"{url}: {error}{hint}")
                while not ((loader in statuses or not over_http) and loader in loaded):
                    changed.clear()
                    await changed.wait()
        except TimeoutError:
            raise TimeoutError(
                f"goto {url}: not loaded within {timeout} s (document response seen: {loader in statuses}, "
                f"committed: {loader in committed}, load event: {loader in loaded})"
            ) from None
        finally:
            unsubscribe()
        return statuses.get(loader)

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page, promises awaited, as JSON-like Python data (a DOM
        node comes back as ``{}``, ``undefined`` as ``None``); a throw raises :class:`JavaScriptError`."""
        return await self._evaluate(expression, COMMAND_TIMEOUT)

    async def _evaluate(self, expression: str, within: float) -> Any:
        evaluated = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            within=within,
        )
        if "exceptionDetails" in evaluated:
            raise JavaScriptError(_exception_text(evaluated["exceptionDetails"]))
        return _value(evaluated["result"])

    async def wait_for(self, expression: str, timeout: float = 10) -> Any:  # noqa: ASYNC109
        """Wait until a JavaScript expression is truthy and return its value.

        The page itself re-checks the expression on every animation frame and every DOM mutation, inside one
        awaited promise, so there is no Python-side polling and no sleep: a change is seen in the frame it
        happens. A throw while checking counts as "not yet" (the element may not exist yet); the last one is
        quoted if the wait times out. If the page navigates meanwhile, the wait goes on in the new document.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = max(deadline - loop.time(), 0.0)
            contexts = self._contexts_created
            script = _WAIT_SCRIPT % {
                "expression": expression,
                "limit": int(remaining * 1000),
                "message": json.dumps(f"wait_for timed out after {timeout} s: {expression!r} stayed falsy"),
            }
            try:
                # The page keeps the time; the margin covers a page too busy to run its timer.
                return await self._evaluate(script, remaining + 5)
            except JavaScriptError as error:
                if "WaitForTimeout:" in error.description:
                    raise WaitTimeout(
                        _without_stack(error.description).removeprefix("WaitForTimeout: ")
                    ) from None
                if not any(lost in error.description for lost in CONTEXT_LOST):
                    raise
            except CDPError as error:
                if not any(lost in error.message for lost in CONTEXT_LOST):
                    raise
            # The document went away under the wait: go on in the next one once it exists.
            async with asyncio.timeout(max(deadline - loop.time(), 0.0) + 5):
                while self._contexts_created == contexts:
                    self._context_created.clear()
                    await self._context_created.wait()

    async def screenshot(self, path: Path) -> None:
        """A PNG of the viewport at ``path`` (its folders created), for the test's artifacts or a human's eyes."""
        captured = await self.send("Page.captureScreenshot", {"format": "png"})
        await asyncio.to_thread(_write, path, base64.b64decode(captured["data"]))

    async def close(self) -> None:
        """Close the tab (the browser closes all of them when :func:`launch` ends; this is for tests of many)."""
        await self.connection.send("Target.closeTarget", {"targetId": self.target_id})


# Evaluated as one awaited promise: checks now, then on each animation frame (state with no DOM change) and each
# DOM mutation (seen before the next frame is painted), and rejects after the limit with a WaitForTimeout.
# The expression sits alone on its lines so a trailing // comment cannot swallow the code after it.
_WAIT_SCRIPT = """(() => {
  const check = () => (
%(expression)s
  );
  class WaitForTimeout extends Error {}
  WaitForTimeout.prototype.name = "WaitForTimeout";
  return new Promise((resolve, reject) => {
    let done = false;
    let lastError = null;
    const finish = (settle, outcome) => {
      if (done) return;
      done = true;
      observer.disconnect();
      clearTimeout(timer);
      settle(outcome);
    };
    const poll = () => {
      if (done) return;
      let value;
      try {
        value = check();
        lastError = null;
      } catch (error) {
        lastError = String(error);
        return;
      }
      if (value) finish(resolve, value);
    };
    const frame = () => {
      poll();
      if (!done) requestAnimationFrame(frame);
    };
    const observer = new MutationObserver(poll);
    const timer = setTimeout(() => {
      const last = lastError === null ? "" : " (last error: " + lastError + ")";
      finish(reject, new WaitForTimeout(%(message)s + last));
    }, %(limit)d);
    observer.observe(document, {childList: true, subtree: true, attributes: true, characterData: true});
    frame();
  });
})()"""


def _value(remote: JSONObject) -> Any:
    """A RemoteObject returned by value as Python data; the numbers JSON cannot carry as floats or ints."""
    if "value" in remote:
        return remote["value"]
    unserializable = remote.get("unserializableValue")
    if unserializable is None:
        return None  # undefined
    if unserializable.endswith("n"):
        return int(unserializable[:-1])  # a BigInt
    return float(unserializable)  # NaN, Infinity, -Infinity, -0


def _describe(remote: JSONObject) -> str:
    """How the console would print one argument."""
    if "value" in remote:
        value = remote["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(remote.get("description") or remote.get("unserializableValue") or remote.get("type", ""))


def _exception_text(details: JSONObject) -> str:
    """The thrown value's description (``Error: boom\\n    at ...``) or, failing that, the exception's text."""
    exception = details.get("exception") or {}
    if "description" in exception:
        return str(exception["description"])
    if "value" in exception:
        return f"{details.get('text', 'Uncaught')} {exception['value']!r}"
    return str(details.get("text", "a JavaScript exception"))


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _without_stack(description: str) -> str:
    return "\n".join(line for line in description.splitlines() if not line.startswith("    at "))


@contextlib.asynccontextmanager
async def launch(tmp_dir: Path, startup_timeout: float = 30.0) -> AsyncIterator[Browser]:
    """Run a headless Chromium with its profile under ``tmp_dir`` for the ``async with`` block, then stop it and
    every process it started. Skips the test when there is no browser to run."""
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            f"no chromium to drive ({', '.join(BROWSER_NAMES)} not on PATH, $CHROMIUM unset): install Debian's "
            f"package with `apt-get install -y chromium` (.ci/run does) or point $CHROMIUM at a browser"
        )
    profile = tmp_dir / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    process = await asyncio.create_subprocess_exec(
        executable,
        *BROWSER_FLAGS,
        f"--user-data-dir={profile}",
        "about:blank",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        # Its own process group: the renderers and helpers it forks can be killed with it, whatever happens.
        start_new_session=True,
        # The crash reporter's database and caches go by these, not by --user-data-dir: kept in tmp_dir, they
        # leave nothing in the home folder, and the crash handler (a daemon in a session of its own) names
        # tmp_dir in its arguments, which is how _stop finds it.
        env={
            **os.environ,
            "XDG_CONFIG_HOME": str(tmp_dir / "config"),
            "XDG_CACHE_HOME": str(tmp_dir / "cache"),
        },
    )
    assert process.stderr is not None
    stderr = _Stderr(process.stderr)
    try:
        try:
            endpoint = await stderr.endpoint(startup_timeout)
        except EOFError:
            await process.wait()
            raise LaunchError(
                f"{executable} exited with {process.returncode} before listening for DevTools; its last lines:\n"
                f"{stderr.tail()}"
            ) from None
        except TimeoutError:
            raise LaunchError(
                f"{executable} did not say where DevTools listens within {startup_timeout} s; its last lines:\n"
                f"{stderr.tail()}"
            ) from None
        async with (
            aiohttp.ClientSession() as http,
            # No size limit: a screenshot of a large viewport is a message of several megabytes.
            http.ws_connect(endpoint, max_msg_size=0) as socket,
        ):
            connection = Connection(socket, stderr)
            try:
                yield Browser(connection, process, endpoint)
            finally:
                await connection.close()
    finally:
        await _stop(process, tmp_dir)
        # Its stderr closes once every process holding it is gone; the drain then ends by itself.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(stderr.task), EXIT_GRACE)
        stderr.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stderr.task


async def _stop(process: asyncio.subprocess.Process, tmp_dir: Path) -> None:
    """SIGTERM (Chromium then ends its own children), SIGKILL to the whole group if it lingers, then SIGKILL to
    whatever of it is still alive (the crash handler lives outside the group) and wait until that has ended, so
    no browser process outlives the ``async with``."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), EXIT_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    stragglers = browser_processes(process.pid, tmp_dir)
    for pid in stragglers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    await _ended(stragglers, EXIT_GRACE)


def browser_processes(group: int, tmp_dir: Path) -> list[int]:
    """Live processes of a browser (zombies, which only wait for their parent to reap them, excluded): those in
    its process group and those naming its ``tmp_dir`` in their arguments."""
    marker = f"{tmp_dir}{os.sep}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            # After the command's closing parenthesis: state, parent, process group, ...
            state, _parent, process_group = (entry / "stat").read_text().rpartition(")")[2].split()[:3]
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue  # gone meanwhile
        if state != "Z" and (
            int(process_group) == group or any(marker in argument for argument in arguments)
        ):
            found.append(int(entry.name))
    return found


async def _ended(pids: list[int], within: float) -> None:
    """Wait until each of ``pids`` has exited: a pidfd turns readable then, so nothing polls."""
    loop = asyncio.get_running_loop()
    descriptors: list[int] = []
    exits: list[asyncio.Event] = []
    try:
        for pid in pids:
            try:
                descriptor = os.pidfd_open(pid)
            except OSError:
                continue  # already gone
            descriptors.append(descriptor)
            exited = asyncio.Event()
            loop.add_reader(descriptor, exited.set)
            exits.append(exited)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                for exited in exits:
                    await exited.wait()
    finally:
        for descriptor in descriptors:
            loop.remove_reader(descriptor)
            os.close(descriptor)
