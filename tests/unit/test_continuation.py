"""Continue tokens round-trip, and mangled ones are refused in kube-apiserver's words."""

from __future__ import annotations

import base64

import pytest

from multiqueue.apiserver.rules import continuation, godecode


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("ns", "a"), ("", "cluster-scoped"), ("kube-system", "x.y-z")],
)
def test_round_trip(namespace: str, name: str) -> None:
    assert continuation.decode(continuation.encode(42, namespace, name)) == (42, namespace, name)


def test_token_is_upstreams_shape() -> None:
    """Unpadded URL-safe base64 of the JSON upstream writes, the start key ending in NUL."""
    token = continuation.encode(7, "ns", "a")
    assert "=" not in token
    assert (
        godecode.b64decode(token.encode(), url=True, padded=False)
        == b'{"v":"meta.k8s.io/v1","rv":7,"start":"ns/a\\u0000"}'
    )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        pytest.param(
            "not-a-token",
            "continue key is not valid: invalid character '\\u009e' looking for beginning of value",
            id="garbage-decodes-to-a-non-json-byte",
        ),
        pytest.param("abc=", "continue key is not valid: illegal base64 data at input byte 3", id="padding"),
        pytest.param("ab!d", "continue key is not valid: illegal base64 data at input byte 2", id="bad-char"),
        pytest.param(
            "abcde", "continue key is not valid: illegal base64 data at input byte 4", id="lone-char"
        ),
        pytest.param("", "continue key is not valid: unexpected end of JSON input", id="empty"),
        pytest.param(
            _b64(b"[1]"),
            "continue key is not valid: json: cannot unmarshal array into Go value of type storage.continueToken",
            id="array",
        ),
        pytest.param(
            _b64(b'{"v":"meta.k8s.io/v2","rv":1,"start":"a"}'),
            "continue key is not valid: server does not recognize this encoded version meta.k8s.io/v2",
            id="version",
        ),
        pytest.param(
            _b64(b'{"v":"meta.k8s.io/v1","rv":0,"start":"a"}'),
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            id="no-rv",
        ),
        pytest.param(
            _b64(b'{"v":"meta.k8s.io/v1","rv":3,"start":""}'),
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)",
            id="no-start",
        ),
        pytest.param(
            _b64(b'{"v":"meta.k8s.io/v1","rv":3,"start":"../etc"}'),
            "continue key is not valid: ../etc",
            id="path-traversal",
        ),
        pytest.param(
            _b64(b"\x01"),
            "continue key is not valid: invalid character '\\x01' looking for beginning of value",
            id="control-byte",
        ),
        pytest.param(
            _b64(b"'"),
            "continue key is not valid: invalid character '\\'' looking for beginning of value",
            id="quote",
        ),
    ],
)
def test_bad_tokens(token: str, message: str) -> None:
    with pytest.raises(continuation.ContinueError) as caught:
        continuation.decode(token)
    assert str(caught.value) == message


def test_a_too_old_token_is_answered_with_one_that_continues_as_of_now() -> None:
    status = continuation.too_old_status("default", "b")
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old")
    assert continuation.decode(status["metadata"]["continue"]) == (continuation.LATEST, "default", "b")
