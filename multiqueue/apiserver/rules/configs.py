"""ConfigMaps and Secrets: their keys, sizes, Secret types and immutability, checked as kube-apiserver checks them.

Secret ``data`` travels base64-encoded (as on the wire); sizes count decoded bytes, as upstream counts them.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final

from multiqueue.api.errors import FieldError, forbidden, immutable, invalid, required, too_long
from multiqueue.api.meta import (
    DNS1123_SUBDOMAIN_MAX,
    as_dict,
    metadata,
    validate_object_meta,
    validate_object_meta_update,
)
from multiqueue.api.types import Obj
from multiqueue.apiserver.rules import godecode

MAX_SIZE: Final = 1024 * 1024  # bytes of data a ConfigMap or a Secret may hold
_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")
_KEY_MSG: Final = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
    "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
OPAQUE: Final = "Opaque"
SERVICE_ACCOUNT_TOKEN: Final = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME: Final = "kubernetes.io/service-account.name"
# type -> the data keys it requires (all of them, except basic-auth: one of the two).
_REQUIRED_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/basic-auth": ("username", "password"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
_JSON_KEYS: Final = (".dockercfg", ".dockerconfigjson")
REDACTED: Final = "<secret contents redacted>"


def config_key_errors(key: str) -> list[str]:
    """Upstream's IsConfigMapKey: what a key of ``data`` or ``binaryData`` may be."""
    errs = (
        []
        if len(key) <= DNS1123_SUBDOMAIN_MAX
        else [f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters"]
    )
    if not _KEY.fullmatch(key):
        errs.append(_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _key_errors(data: Any, path: str) -> list[FieldError]:
    return [invalid(f"{path}[{key}]", key, m) for key in as_dict(data) for m in config_key_errors(str(key))]


def _decoded(value: Any) -> bytes:
    """A base64 value as stored; what does not decode (decoding refused it already) counts as its text."""
    text = str(value or "")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text.encode()


# --- ConfigMaps -----------------------------------------------------------------------------------------------


def validate_configmap(cm: Obj) -> list[FieldError]:
    errs = validate_object_meta(cm.get("metadata"), namespaced=True)
    data, binary = as_dict(cm.get("data")), as_dict(cm.get("binaryData"))
    for key in data:
        errs += [invalid(f"data[{key}]", key, m) for m in config_key_errors(str(key))]
        if key in binary:
            errs.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    errs += _key_errors(binary, "binaryData")
    size = sum(len(str(v or "").encode()) for v in data.values()) + sum(
        len(_decoded(v)) for v in binary.values()
    )
    if size > MAX_SIZE:
        errs.append(too_long("", MAX_SIZE))
    return errs


def validate_configmap_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    errs += _immutable_data(new, old, ("data", "binaryData"))
    return errs + validate_configmap(new)


def _immutable_data(new: Obj, old: Obj, fields: tuple[str, ...]) -> list[FieldError]:
    """Once ``immutable: true`` is stored, it and the data stay."""
    if old.get("immutable") is not True:
        return []
    detail = "field is immutable when `immutable` is set"
    errs = [forbidden("immutable", detail)] if new.get("immutable") is not True else []
    return errs + [forbidden(f, detail) for f in fields if (new.get(f) or None) != (old.get(f) or None)]


# --- Secrets --------------------------------------------------------------------------------------------------


def default_secret(secret: Obj) -> None:
    """An untyped Secret is Opaque."""
    if not secret.get("type"):
        secret["type"] = OPAQUE


def fold_string_data(secret: Obj) -> None:
    """``stringData`` is write-only: each entry goes into ``data`` base64-encoded (winning over the same key
    there) and the field itself is never stored."""
    plain = secret.pop("stringData", None)
    if isinstance(plain, dict) and plain:
        data: dict[str, Any] = dict(as_dict(secret.get("data")))
        for key, value in plain.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        secret["data"] = data


def validate_secret(secret: Obj) -> list[FieldError]:
    errs = validate_object_meta(secret.get("metadata"), namespaced=True)
    data = as_dict(secret.get("data"))
    errs += _key_errors(data, "data")
    if sum(len(_decoded(v)) for v in data.values()) > MAX_SIZE:
        errs.append(too_long("data", MAX_SIZE))
    kind = secret.get("type")
    if kind == SERVICE_ACCOUNT_TOKEN:
        if not as_dict(metadata(secret).get("annotations")).get(SERVICE_ACCOUNT_NAME):
            errs.append(required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME}]"))
    elif kind == "kubernetes.io/basic-auth":
        if "username" not in data and "password" not in data:
            errs += [required("data[username]"), required("data[password]")]
    elif kind == "kubernetes.io/ssh-auth":
        if not _decoded(data.get("ssh-privatekey")):
            errs.append(required("data[ssh-privatekey]"))
    elif isinstance(kind, str) and kind in _REQUIRED_KEYS:
        errs += _typed_keys(data, _REQUIRED_KEYS[kind])
    return errs


def _typed_keys(data: Obj, keys: tuple[str, ...]) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in keys:
        if key not in data:
            errs.append(required(f"data[{key}]"))
            if key in _JSON_KEYS:
                break  # upstream stops at the missing document
        elif key in _JSON_KEYS:
            try:
                godecode.json_object(_decoded(data[key]), "map[string]interface {}")
            except godecode.DecodeError as exc:
                errs.append(invalid(f"data[{key}]", REDACTED, str(exc)))
    return errs


def validate_secret_update(new: Obj, old: Obj) -> list[FieldError]:
    errs = validate_object_meta_update(new.get("metadata"), old.get("metadata"))
    if new.get("type") != old.get("type"):
        errs.append(immutable("type", new.get("type")))
    errs += _immutable_data(new, old, ("data",))
    return errs + validate_secret(new)
