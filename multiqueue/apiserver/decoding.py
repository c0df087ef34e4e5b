"""Request bodies as kube-apiserver's decoder reads them: YAML as the JSON it stands for, and unknown fields found
against the kind's Go type.

A create, an update or a delete (its DeleteOptions) may send YAML (``Content-Type: application/yaml``); it is read
as Go's YAML-to-JSON conversion reads it (timestamps stay strings, keys become strings), then treated as the same
JSON would be.

A field the type does not have is dropped whatever ``fieldValidation`` says; ``Strict`` refuses the request with
every such field named (400 BadRequest, "strict decoding error"), ``Warn`` (the default) answers with one
``Warning`` header per field, ``Ignore`` says nothing. The types come from the official client's models, which
are generated from the same Go types (``openapi_types`` and ``attribute_map`` of each model).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable
from typing import Any, Final

import kubernetes.client.models as models
import yaml

from multiqueue.api import errors, manifests
from multiqueue.api.types import Obj
from multiqueue.apiserver import gotypes
from multiqueue.apiserver.protobuf import summarize
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError
from multiqueue.apiserver.rules import godecode, structural

YAML: Final = "application/yaml"
# What a create or update body may be written in, as kube-apiserver lists it when refusing another.
BODY_MEDIA_TYPES: Final = ("application/json", YAML, "application/vnd.kubernetes.protobuf")
# PyYAML's words for the commonest mistakes -> libyaml's (go-yaml's), which upstream's message carries.
_LIBYAML_WORDS: Final = {
    "mapping values are not allowed here": "mapping values are not allowed in this context",
    "expected <block end>, but found '<block mapping start>'": "did not find expected key",
}
STRICT: Final = "Strict"
WARN: Final = "Warn"
IGNORE: Final = "Ignore"
DIRECTIVES: Final = (STRICT, WARN, IGNORE)
# How the client writes a list and a map of a type: List[V1Container], Dict[str, List[str]].
_LIST: Final = re.compile(r"List\[(?P<item>.+)\]")
_DICT: Final = re.compile(r"Dict\[str, (?P<value>.+)\]")


class _YamlLoader(yaml.SafeLoader):
    """YAML 1.1 as Go's converter resolves it, but for timestamps: they stay the strings JSON has."""


_YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_yaml(raw: bytes, kind: str) -> Any:
    """The value a YAML body stands for, as JSON would have it. A body that is not YAML is refused as
    kube-apiserver refuses it: 400, "the object provided is unrecognized", the parser's complaint and the start of
    the body; the parser's words are PyYAML's, its line numbers counted as go-yaml counts them."""
    try:
        return _json_keys(_shallow(lambda: yaml.load(raw, Loader=_YamlLoader)))
    except godecode.TooDeep as exc:
        message = f"the object provided is unrecognized (must be of type {kind}): {exc} ({summarize(raw)})"
        raise ApiError(errors.bad_request_status(message)) from exc
    except yaml.YAMLError as exc:
        complaint = f"yaml: {_yaml_line(exc)}{_problem(exc)}"
        message = (
            f"the object provided is unrecognized (must be of type {kind}): {complaint} ({summarize(raw)})"
        )
        raise ApiError(errors.bad_request_status(message)) from exc


def _shallow(load: Callable[[], Any]) -> Any:
    """What ``load`` reads from a YAML body, refused (:class:`godecode.TooDeep`) where it nests deeper than JSON
    bodies may; the YAML parser recurses, so a body nested past Python's limit is refused the same way."""
    try:
        value = load()
    except RecursionError:
        raise godecode.TooDeep(godecode.MAX_DEPTH) from None
    if godecode.nesting_depth(value) > godecode.MAX_DEPTH:
        raise godecode.TooDeep(godecode.MAX_DEPTH)
    return value


def _problem(exc: yaml.YAMLError) -> str:
    """What is wrong, in libyaml's (go-yaml's) words where they differ from PyYAML's."""
    if isinstance(exc, yaml.reader.ReaderError):
        return "control characters are not allowed"
    problem = str(getattr(exc, "problem", None) or exc)
    return _LIBYAML_WORDS.get(problem, problem)


def _yaml_line(exc: yaml.YAMLError) -> str:
    """go-yaml names the 0-based line of a parser error's problem, one more for a scanner's, else its context's."""
    problem, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    line = 0
    if problem is not None and problem.line:
        line = problem.line + (1 if isinstance(exc, yaml.scanner.ScannerError) else 0)
    elif context is not None:
        line = context.line
    return f"line {line}: " if line else ""


def _json_keys(value: Any) -> Any:
    """Map keys as JSON has them: strings (``true``, ``1``), as Go's converter writes them."""
    if isinstance(value, dict):
        return {_key(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_keys(v) for v in value]
    return value


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


@functools.cache
def _fields(model: str) -> dict[str, str] | None:
    """JSON field name -> the client's type name, for a model of the client; None for scalars and ``object``."""
    cls = getattr(models, model, None)
    if cls is None or not hasattr(cls, "attribute_map"):
        return None
    return {json_name: cls.openapi_types[name] for name, json_name in cls.attribute_map.items()}


def drop_unknown(model: str, body: Any, path: str = "") -> list[str]:
    """Remove from ``body`` every field the model does not have; their paths, in document order."""
    fields = _fields(model)
    if fields is None or not isinstance(body, dict):
        return []
    dropped: list[str] = []
    for key in list(body):
        where = f"{path}.{key}" if path else key
        kind = fields.get(key)
        if kind is None:
            dropped.append(where)
            del body[key]
        else:
            dropped += _drop_in(kind, body[key], where)
    return dropped


def _drop_in(kind: str, value: Any, path: str) -> list[str]:
    if (listed := _LIST.fullmatch(kind)) is not None:
        items = value if isinstance(value, list) else []
        return [d for i, item in enumerate(items) for d in _drop_in(listed["item"], item, f"{path}[{i}]")]
    if (mapped := _DICT.fullmatch(kind)) is not None:
        entries = value.items() if isinstance(value, dict) else []
        return [d for k, item in entries for d in _drop_in(mapped["value"], item, f"{path}[{k}]")]
    return drop_unknown(kind, value, path)


def check_directive(directive: str, options_kind: str) -> None:
    """Raise :class:`ApiError` (422, on the request's options kind) for an unknown ``fieldValidation``."""
    if directive not in ("", *DIRECTIVES):
        problem = errors.not_supported("fieldValidation", directive, ["", *sorted(DIRECTIVES)])
        raise ApiError(errors.invalid_status(options_kind, "meta.k8s.io", "", [problem]))


def check_media_type(content_type: str) -> None:
    """Refuse a create or update body in a media type kube-apiserver's decoder does not read (415)."""
    media = content_type.split(";")[0].strip().lower()
    if media and media not in BODY_MEDIA_TYPES:
        accepted = ", ".join(BODY_MEDIA_TYPES)
        message = (
            f"the body of the request was in an unknown format - accepted media types include: {accepted}"
        )
        raise ApiError(errors.status(415, "UnsupportedMediaType", message))


def read_json(raw: bytes, kind: str) -> Any:
    """The value of a JSON create or update body; one that is not JSON (or nests too deeply) is refused as
    kube-apiserver refuses it: 400, with Go's syntax error and the start of the body."""
    try:
        return godecode.json_loads(raw)
    except godecode.DecodeError as exc:
        message = (
            f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; "
            f"json parse error: {exc} ({summarize(raw)})"
        )
        raise ApiError(errors.status(400, "BadRequest", message)) from exc


def decode(rtype: ResourceType, body: Any, directive: str) -> list[str]:
    """Drop the fields ``rtype`` does not have (a custom resource: that its schema does not know) from
    ``body``; the Warning headers to answer with. Raises :class:`ApiError` under Strict for any unknown field
    (the directive checked beforehand by :func:`check_directive`)."""
    _check_types(rtype, body)
    if rtype.schema is not None:
        meta = body.get("metadata") if isinstance(body, dict) else None
        unknown = structural.prune(body, rtype.schema) if isinstance(body, dict) else []
        unknown = sorted(unknown + drop_unknown("V1ObjectMeta", meta, "metadata"))
    elif rtype.model is None:
        return []
    else:
        unknown = drop_unknown(rtype.model, body)
    if not unknown or directive == IGNORE:
        return []
    if directive == STRICT:
        raise ApiError(strict_error(rtype.kind, rtype.version, unknown))
    return warnings(unknown)


def _check_types(rtype: ResourceType, body: Any) -> None:
    """A value of the wrong JSON type for its Go field fails decoding (400), with Go's error in kube-apiserver's
    words; a custom resource's metadata is an ObjectMeta all the same."""
    if rtype.schema is not None:
        meta = body.get("metadata") if isinstance(body, dict) else None
        problem = gotypes.message_error(gotypes.OBJECT_META, meta) if meta is not None else None
    else:
        problem = gotypes.type_error(rtype.api_version, rtype.kind, body)
    if problem:
        message = f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: {problem}'
        raise ApiError(errors.status(400, "BadRequest", message))


def strict_error(kind: str, version: str, unknown: list[str]) -> Obj:
    """The 400 kube-apiserver answers under ``fieldValidation=Strict``."""
    named = ", ".join(f'unknown field "{field}"' for field in unknown)
    message = f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {named}'
    return errors.status(400, "BadRequest", message)


def warnings(unknown: list[str]) -> list[str]:
    """The ``Warning`` header values under ``fieldValidation=Warn``."""
    return [warning(f'unknown field "{field}"') for field in unknown]


def warning(text: str) -> str:
    """One ``Warning`` header value (RFC 7234 code 299), quoted as Go's net/http writes it."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


# --- server-side apply --------------------------------------------------------------------------------------


class _ApplyLoader(_YamlLoader):
    """YAML as upstream reads an apply body: timestamps stay strings, and repeated keys are noted (the last wins)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    line = key_node.start_mark.line + 1
                    self.repeated.append(f'line {line}: key "{key_node.value}" already set in map')
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def decode_apply(body: Any, directive: str) -> tuple[Obj, list[str]]:
    """The configuration an apply request carries (a YAML or JSON object), and the Warning headers to answer with.

    Strict refuses a body that repeats a key (400), Warn warns about each; anything else it does not decode is a
    400 with upstream's words.
    """
    repeated: list[str] = []
    if isinstance(body, str):
        try:
            loader = _ApplyLoader(body)
        except yaml.YAMLError as exc:  # the reader refuses control characters before parsing
            raise ApiError(errors.bad_request_status(f"error encoding patch: yaml: {_problem(exc)}")) from exc
        try:
            body = _shallow(loader.get_single_data)
        except godecode.TooDeep as exc:
            raise ApiError(errors.bad_request_status(f"error decoding patch: {exc}")) from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}: " if mark is not None else ""
            raise ApiError(
                errors.bad_request_status(f"error encoding patch: yaml: {where}{_problem(exc)}")
            ) from exc
        finally:
            loader.dispose()
        repeated = loader.repeated
    if body is None:
        body = {}
    if not isinstance(body, dict):
        kind = "array" if isinstance(body, list) else "string" if isinstance(body, str) else "number"
        message = f"error decoding patch: json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
        raise ApiError(errors.bad_request_status(message))
    if repeated and directive == STRICT:
        details = "\n".join(f"  {r}" for r in repeated)
        message = (
            f"error strict decoding patch: error converting YAML to JSON: yaml: unmarshal errors:\n{details}"
        )
        raise ApiError(errors.bad_request_status(message))
    return body, [warning(r) for r in repeated] if directive == WARN else []


def decoding_problem(obj: dict[str, Any]) -> str:
    """What kube-apiserver's decoder refuses before validation, as kubectl's default strict field validation
    meets it: a value of the wrong type for its field, or a field the kind does not have (a typo)."""
    kind = str(obj["kind"])
    named = f"{kind.lower()}/{manifests.display_name(obj)}"
    problem = gotypes.type_error("batch/v1", kind, obj)
    if problem:
        return f'{named}: {kind} in version "v1" cannot be handled as a {kind}: {problem}'
    unknown = drop_unknown(f"V1{kind}", copy.deepcopy(obj))
    return f"{named}: {strict_error(kind, 'v1', unknown)['message']}" if unknown else ""
