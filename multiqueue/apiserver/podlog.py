"""pods/log as kube-apiserver serves it: the options decoded and validated here, the container chosen, then the
log read from the kubelet API of the pod's node (multiqueue/local/kubeletapi.py), streamed back as it comes.

The node is reached as kube-apiserver is told to reach it in a local cluster (``--kubelet-preferred-address-types=
InternalIP,Hostname``, the port in ``status.daemonEndpoints``), over HTTPS without verifying the kubelet's
self-signed certificate (no ``--kubelet-certificate-authority``). What the kubelet refuses comes back as the
Status kube-apiserver's response checker makes of it; a pod not yet on a node has an empty log.
"""

from __future__ import annotations

import contextlib
from typing import Final

import aiohttp
from aiohttp import web

from multiqueue.api import errors, query
from multiqueue.api.meta import as_dict, as_list, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver.rest import ApiError
from multiqueue.apiserver.rules import podlogs
from multiqueue.apiserver.store import Store

ADDRESS_TYPES: Final = ("InternalIP", "Hostname")
CHUNK: Final = 1 << 16
# Enough to open the connection and get the kubelet's first answer; a followed log may then stay open.
CONNECT_TIMEOUT: Final = aiohttp.ClientTimeout(total=None, connect=10.0, sock_connect=10.0)


def options_of(request: web.Request, pod_name: str) -> podlogs.PodLogOptions:
    try:
        options = podlogs.parse(request.query)
    except query.QueryError as exc:
        raise ApiError(errors.bad_request_status(str(exc))) from exc
    found = podlogs.errors(options)
    if found:
        raise ApiError(errors.invalid_status("PodLogOptions", "", pod_name, found))
    return options


def kubelet_url(node: Obj) -> str | None:
    """Where the node's kubelet API listens, or None when its Node names no address or port."""
    status = as_dict(node.get("status"))
    port = as_dict(as_dict(status.get("daemonEndpoints")).get("kubeletEndpoint")).get("Port")
    addresses = {as_dict(a).get("type"): as_dict(a).get("address") for a in as_list(status.get("addresses"))}
    host = next((addresses[t] for t in ADDRESS_TYPES if addresses.get(t)), None)
    if not port or not host:
        return None
    return f"https://{host}:{port}"


def kubelet_refusal(code: int, text: str, pod_name: str) -> Obj:
    """The Status for a kubelet's non-2xx answer, as upstream's GenericHttpResponseChecker makes it."""
    if code == 400:
        return errors.bad_request_status(text)
    if code == 500:
        return errors.status(
            500, "InternalError", f"Internal error occurred: {text}", {"causes": [{"message": text}]}
        )
    reasons = {
        401: ("Unauthorized", "the server has asked for the client to provide credentials"),
        403: ("Forbidden", text),
        404: ("NotFound", "the server could not find the requested resource"),
        422: ("Invalid", "the server rejected our request due to an error in our request"),
        503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    }
    default = (
        "InternalError",
        f"an error on the server ({text!r}) has prevented the request from succeeding",
    )
    reason, message = reasons.get(code, default if code >= 500 else ("", ""))
    if not reason:
        message = f"the server responded with the status code {code} but did not return more information"
    details = {"name": pod_name, "kind": "pods/log"}
    return errors.status(code, reason or "Unknown", f"{message} ( pods/log {pod_name})", details)


class PodLogs:
    """Serves pods/log for one API server; holds the HTTP session to kubelets."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def serve(self, request: web.Request, pod: Obj, store: Store) -> web.StreamResponse:
        pod_name = str(metadata(pod).get("name"))
        options = options_of(request, pod_name)
        try:
            container = podlogs.container(pod, options.container)
        except podlogs.NoContainer as exc:
            raise ApiError(errors.bad_request_status(str(exc))) from exc
        node_name = str(as_dict(pod.get("spec")).get("nodeName") or "")
        if not node_name:
            return web.Response(text="", content_type="text/plain")
        node = store.get("nodes", "", node_name)
        if node is None:
            # Upstream's node lookup for the connection names the resource "pods".
            raise ApiError(errors.not_found_status("pods", "", node_name))
        base = kubelet_url(node)
        if base is None:
            raise ApiError(errors.status(500, "InternalError", f"no kubelet endpoint for node {node_name}"))
        path = f"{base}/containerLogs/{metadata(pod).get('namespace')}/{pod_name}/{container}"
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=CONNECT_TIMEOUT)
        try:
            upstream = await self._session.get(path, params=podlogs.kubelet_query(options), ssl=False)
        except aiohttp.ClientError as exc:
            message = f"Get {path!r}: {exc}"
            raise ApiError(errors.status(500, "InternalError", message)) from exc
        async with upstream:
            if not 200 <= upstream.status <= 206:
                raise ApiError(kubelet_refusal(upstream.status, await upstream.text(), pod_name))
            response = web.StreamResponse(headers={"Content-Type": "text/plain"})
            if options.follow:
                response.enable_chunked_encoding()
            await response.prepare(request)
            with contextlib.suppress(ConnectionResetError, aiohttp.ClientError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await response.write_eof()
            return response
