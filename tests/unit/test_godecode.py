"""Go's decoders' errors, word for word: each case was checked against Go's encoding/base64 and encoding/json."""

from __future__ import annotations

import re
from typing import Any

import pytest

from multiqueue.api import errors
from multiqueue.apiserver.rules import godecode


@pytest.mark.parametrize(
    ("text", "decoded", "error"),
    [
        pytest.param(b"eA==", b"x", "", id="padded"),
        pytest.param(b"eA==\n", b"x", "", id="newline-after"),
        pytest.param(b"eA", b"", "illegal base64 data at input byte 0", id="missing-padding"),
        pytest.param(b"eA=", b"", "illegal base64 data at input byte 3", id="half-padding"),
        pytest.param(b"eA=x", b"", "illegal base64 data at input byte 2", id="bad-second-pad"),
        pytest.param(b"eA==x", b"", "illegal base64 data at input byte 4", id="trailing-garbage"),
        pytest.param(b"e===", b"", "illegal base64 data at input byte 1", id="pad-too-early"),
        pytest.param(b"a!bc", b"", "illegal base64 data at input byte 1", id="bad-char"),
        pytest.param(b"abc", b"", "illegal base64 data at input byte 0", id="short-quantum"),
    ],
)
def test_std_base64(text: bytes, decoded: bytes, error: str) -> None:
    if error:
        with pytest.raises(godecode.DecodeError) as caught:
            godecode.b64decode(text)
        assert str(caught.value) == error
    else:
        assert godecode.b64decode(text) == decoded


def test_raw_url_base64_has_no_padding() -> None:
    assert godecode.b64decode(b"eA", url=True, padded=False) == b"x"
    with pytest.raises(godecode.DecodeError, match="input byte 2"):
        godecode.b64decode(b"eA==", url=True, padded=False)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (b"{not json", "invalid character 'n' looking for beginning of object key string"),
        (b"name: x", "invalid character 'a' in literal null (expecting 'u')"),
        (b'{"a":1}', ""),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b"}', "invalid character '\"' after object key:value pair"),
        (b"[1,2", "unexpected end of JSON input"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b"[1,]", "invalid character ']' looking for beginning of value"),
        (b'"abc', "unexpected end of JSON input"),
        (b'"a\\qb"', "invalid character 'q' in string escape code"),
        (b'"\\u12g4"', "invalid character 'g' in \\u hexadecimal character escape"),
        (b"-x", "invalid character 'x' in numeric literal"),
        (b"-01", "invalid character '1' after top-level value"),
        (b"1.", "invalid character ' ' after decimal point in numeric literal"),
        (b"1e+", "invalid character ' ' in exponent of numeric literal"),
        (b"trUe", "invalid character 'U' in literal true (expecting 'u')"),
        (b"nul", "invalid character ' ' in literal null (expecting 'l')"),
        (b"{}}", "invalid character '}' after top-level value"),
        (b"   ", "unexpected end of JSON input"),
        (b'{"a":[{"b":null}]}', ""),
        (b'"tab\tinside"', "invalid character '\\t' in string literal"),
    ],
)
def test_json_syntax_errors(text: bytes, error: str) -> None:
    assert godecode.json_syntax_error(text) == error


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"[1]", "json: cannot unmarshal array into Go value of type T"),
        (b'"x"', "json: cannot unmarshal string into Go value of type T"),
        (b"1", "json: cannot unmarshal number into Go value of type T"),
    ],
)
def test_json_object_of_another_type(data: bytes, message: str) -> None:
    with pytest.raises(godecode.DecodeError) as caught:
        godecode.json_object(data, "T")
    assert str(caught.value) == message
    assert godecode.json_object(b"null", "T") == {}


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        (1e20, "1e+20"),
        (1234567.0, "1.234567e+06"),
        (999999.0, "999999"),
        (2.0, "2"),
        (0.5, "0.5"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
    ],
)
def test_floats_print_as_go_prints_them(value: float, printed: str) -> None:
    assert errors.go_float(value) == printed


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("data", "value"),
    [
        pytest.param(b'"\\ud800"', "\ufffd", id="lone-high-surrogate"),
        pytest.param(b'{"\\udfffk": "a\\ud83d\\ude00"}', {"\ufffdk": "a\U0001f600"}, id="lone-key-and-pair"),
        pytest.param(b'["\xff"]', ["\ufffd"], id="invalid-utf8"),
        pytest.param(b"[" * 200 + b"]" * 200, _nested(200), id="at-the-depth-limit"),
    ],
)
def test_json_is_read_as_go_reads_it(data: bytes, value: Any) -> None:
    assert godecode.json_loads(data) == value


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b'{"a": NaN}', "invalid character 'N' looking for beginning of value", id="nan"),
        pytest.param(b"[-Infinity]", "invalid character 'I' in numeric literal", id="infinity"),
        pytest.param(b"[" * 201 + b"]" * 201, "exceeded max depth of 200", id="past-the-depth-limit"),
        pytest.param(b"[" * 50_000 + b"]" * 50_000, "exceeded max depth of 200", id="past-pythons-recursion"),
    ],
)
def test_json_that_go_or_this_server_refuses(data: bytes, error: str) -> None:
    with pytest.raises(godecode.DecodeError, match=re.escape(error)):
        godecode.json_loads(data)
