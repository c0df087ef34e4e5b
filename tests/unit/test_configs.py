"""ConfigMaps and Secrets are refused for what kube-apiserver refuses them for, in its words."""

from __future__ import annotations

from typing import Any

import pytest

from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import configs

KEY_MSG = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)


def _cm(**fields: Any) -> Obj:
    return {"metadata": {"name": "c", "namespace": "ns"}, **fields}


def _secret(**fields: Any) -> Obj:
    return {"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque", **fields}


@pytest.mark.parametrize(
    ("key", "problems"),
    [
        ("key.name", []),
        ("KEY_NAME-1", []),
        ("bad key!", [KEY_MSG]),
        (".", ["must not be '.'"]),
        ("..", ["must not be '..'"]),
        ("..a", ["must not start with '..'"]),
        ("k" * 254, ["must be no more than 253 characters"]),
    ],
)
def test_config_keys(key: str, problems: list[str]) -> None:
    assert configs.config_key_errors(key) == problems


@pytest.mark.parametrize(
    ("cm", "messages"),
    [
        pytest.param(_cm(data={"ok": "x"}), [], id="valid"),
        pytest.param(
            _cm(data={"bad key!": "x"}),
            [f'data[bad key!]: Invalid value: "bad key!": {KEY_MSG}'],
            id="bad-key",
        ),
        pytest.param(
            _cm(data={"k": "x"}, binaryData={"k": "eA=="}),
            ['data[k]: Invalid value: "k": duplicate of key present in binaryData'],
            id="key-in-both",
        ),
        pytest.param(
            _cm(data={"k": "x" * (configs.MAX_SIZE + 1)}),
            [": Too long: may not be more than 1048576 bytes"],
            id="too-big",
        ),
    ],
)
def test_validate_configmap(cm: Obj, messages: list[str]) -> None:
    assert [e.message() for e in configs.validate_configmap(cm)] == messages


def test_immutable_configmap_keeps_its_data() -> None:
    old = _cm(data={"k": "x"}, immutable=True)
    new = _cm(data={"k": "y"}, immutable=False)
    assert [e.message() for e in configs.validate_configmap_update(new, old)] == [
        "immutable: Forbidden: field is immutable when `immutable` is set",
        "data: Forbidden: field is immutable when `immutable` is set",
    ]
    assert configs.validate_configmap_update(_cm(data={"k": "x"}, immutable=True), old) == []


@pytest.mark.parametrize(
    ("secret", "messages"),
    [
        pytest.param(_secret(data={"k": "eA=="}), [], id="opaque"),
        pytest.param(
            _secret(data={"bad key!": "eA=="}),
            [f'data[bad key!]: Invalid value: "bad key!": {KEY_MSG}'],
            id="bad-key",
        ),
        pytest.param(
            _secret(type="kubernetes.io/tls", data={}),
            ["data[tls.crt]: Required value", "data[tls.key]: Required value"],
            id="tls-needs-both",
        ),
        pytest.param(
            _secret(type="kubernetes.io/basic-auth"),
            ["data[username]: Required value", "data[password]: Required value"],
            id="basic-auth-needs-one",
        ),
        pytest.param(
            _secret(type="kubernetes.io/basic-auth", data={"password": ""}), [], id="basic-auth-password"
        ),
        pytest.param(
            _secret(type="kubernetes.io/ssh-auth", data={"ssh-privatekey": ""}),
            ["data[ssh-privatekey]: Required value"],
            id="ssh-key-empty",
        ),
        pytest.param(
            _secret(type="kubernetes.io/service-account-token"),
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"],
            id="token-names-its-account",
        ),
        pytest.param(
            _secret(type="kubernetes.io/dockerconfigjson", data={".dockerconfigjson": "bm90IGpzb24="}),
            [
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": invalid character 'o' in "
                "literal null (expecting 'u')"
            ],
            id="docker-config-not-json",
        ),
        pytest.param(
            _secret(type="kubernetes.io/dockercfg", data={".dockercfg": "e30="}), [], id="docker-config-json"
        ),
        pytest.param(_secret(type="example.com/custom", data={"any": "eA=="}), [], id="custom-type"),
    ],
)
def test_validate_secret(secret: Obj, messages: list[str]) -> None:
    assert [e.message() for e in configs.validate_secret(secret)] == messages


def test_secret_type_is_immutable_and_defaults_to_opaque() -> None:
    secret: Obj = {"metadata": {"name": "s", "namespace": "ns"}}
    configs.default_secret(secret)
    assert secret["type"] == "Opaque"
    changed = {**secret, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}
    assert [e.message() for e in configs.validate_secret_update(changed, secret)] == [
        'type: Invalid value: "kubernetes.io/tls": field is immutable'
    ]


def test_string_data_folds_into_data() -> None:
    secret = _secret(data={"a": "eA==", "b": "eA=="}, stringData={"b": "plain"})
    configs.fold_string_data(secret)
    assert secret == _secret(data={"a": "eA==", "b": "cGxhaW4="})
