"""The generic write and read paths every resource shares: what upstream calls the registry's REST storage.

Each verb checks, prepares and validates synchronously, then makes at most one store write. Nothing awaits
between the read of the current object and the write, so two requests on the same object can never interleave
their checks; the resourceVersion precondition does the rest.
"""

from __future__ import annotations

import copy
import json
import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from multiqueue.api import errors, fieldselectors, labelsyntax
from multiqueue.api.meta import as_dict, as_list, drop_empty_metadata, format_time, metadata
from multiqueue.api.types import Obj
from multiqueue.apiserver import gojson, gotypes
from multiqueue.apiserver.openapi import kind_structure
from multiqueue.apiserver.registry import Registry
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rules import apply as smd
from multiqueue.apiserver.rules import continuation, eventsv1, managedfields, patches, schemas
from multiqueue.apiserver.store import Expired, Store
from multiqueue.apiserver.strategies import BACKGROUND, FOREGROUND, ORPHAN, Strategy
from multiqueue.loop.errors import ExpectedFailure

ORPHAN_FINALIZER: Final = "orphan"
FOREGROUND_FINALIZER: Final = "foregroundDeletion"
NAMESPACE_FINALIZER: Final = "kubernetes"
MODIFIED_MESSAGE: Final = (
    "the object has been modified; please apply your changes to the latest version and try again"
)
NAMESPACE_MISMATCH: Final = (
    "the namespace of the provided object does not match the namespace sent on the request"
)
INVALID_REQUEST: Final = "the server rejected our request due to an error in our request"
# Kinds whose delete answers with the object, as upstream's storage for them is set up to; the rest a Status.
RETURN_DELETED_OBJECT: Final = frozenset({"pods", "services", "serviceaccounts"})
_GENERATE_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_PATCH: Final = "application/strategic-merge-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"
# (kind, apiVersion of the object, apiVersion shown) -> the conversion, for kinds served in two groups over one
# storage; objects of a CRD's versions need none (only their apiVersion differs).
CONVERSIONS: Final[dict[tuple[str, str, str], Callable[[Obj], Obj]]] = {
    ("Event", eventsv1.CORE_API_VERSION, eventsv1.API_VERSION): eventsv1.from_core,
    ("Event", eventsv1.API_VERSION, eventsv1.CORE_API_VERSION): eventsv1.to_core,
}


class ApiError(ExpectedFailure):
    """A failed request; carries the ``Status`` body the server answers with."""

    def __init__(self, status: Obj) -> None:
        super().__init__(status.get("message", ""))
        self.status = status

    @property
    def code(self) -> int:
        return int(self.status.get("code", 500))


def _error(code: int, reason: str, message: str, details: Obj | None = None) -> ApiError:
    status = errors.status(code, reason, message, details)
    if details is not None:
        status["details"] = details  # upstream writes an empty details object on some errors
    return ApiError(status)


def _what(rtype: ResourceType) -> str:
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


class Rest:
    def __init__(self, store: Store, registry: Registry, clock: Callable[[], datetime] | None = None) -> None:
        self.store = store
        self.registry = registry
        self.clock = clock or (lambda: datetime.now(UTC))

    # --- reads -----------------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rtype.key, namespace if rtype.namespaced else "", name)
        if obj is None:
            raise ApiError(errors.not_found_status(rtype.plural, rtype.group, name))
        return self._present(rtype, obj)

    def list_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
        at: int | None = None,
    ) -> Obj:
        """``at``: the objects as they were at that resourceVersion (resourceVersionMatch=Exact). A continued
        LIST shows the snapshot its first page showed, or is a 410 once that left the watch window."""
        matches = self.matcher(rtype, label_selector, field_selector)
        start = None
        if continue_token:
            token_rv, start = decode_continue(continue_token)
            at = token_rv if token_rv != continuation.LATEST else None
        scope = namespace if rtype.namespaced else None
        rv = self.store.resource_version if at is None else at
        items: list[Obj] = []
        remaining = 0
        next_token = ""
        try:
            listed = (
                self.store.list_objects(rtype.key, scope)
                if at is None
                else self.store.objects_at(rtype.key, scope, at)
            )
        except Expired:
            if start is None:
                raise
            raise ApiError(continuation.too_old_status(*start)) from None
        for obj in listed:
            meta = metadata(obj)
            key = (str(meta.get("namespace") or ""), str(meta.get("name")))
            if start is not None and key <= start:
                continue
            if not matches(obj):
                continue
            if limit > 0 and len(items) >= limit:
                remaining += 1
                continue
            items.append(self._list_item(rtype, obj))
            if limit > 0 and len(items) == limit:
                next_token = continuation.encode(rv, *key)
        list_meta: Obj = {"resourceVersion": str(rv)}
        if rtype.schema is not None:
            # Custom resources' lists always carry it, as upstream's unstructured lists do.
            list_meta["continue"] = ""
        if remaining:
            list_meta["continue"] = next_token
            if not label_selector and not field_selector:
                # Upstream counts what is left only when it need not filter to know.
                list_meta["remainingItemCount"] = remaining
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": list_meta,
            "items": items,
        }

    def matcher(self, rtype: ResourceType, label_selector: str, field_selector: str) -> Callable[[Obj], bool]:
        """A predicate for list and watch; bad selectors are 400s, as upstream answers them."""
        try:
            labels = labelsyntax.parse_label_selector(label_selector)
            fields = fieldselectors.parse_field_selector(field_selector)
        except errors.SelectorError as exc:
            raise _error(400, "BadRequest", str(exc)) from exc
        unsupported = fieldselectors.unsupported_fields(rtype.group, rtype.kind, fields)
        if unsupported:
            message = fieldselectors.unsupported_field_message(
                rtype.group, rtype.kind, unsupported[0], rtype.schema is not None
            )
            raise _error(400, "BadRequest", message)

        def matches(obj: Obj) -> bool:
            if not labels.matches(as_dict(metadata(obj).get("labels"))):
                return False
            return fields.empty or fields.matches(fieldselectors.fields_of(rtype.group, rtype.kind, obj))

        return matches

    def _list_item(self, rtype: ResourceType, obj: Obj) -> Obj:
        """Items of a built-in kind's list carry no apiVersion and kind (Go's typed lists drop them); custom
        resources' items keep theirs."""
        if rtype.schema is not None:
            return self._present(rtype, obj)
        return {k: v for k, v in self._present(rtype, obj).items() if k not in ("apiVersion", "kind")}

    def _present(self, rtype: ResourceType, obj: Obj) -> Obj:
        """An object as the version asked for shows it: a stored core Event converted for events.k8s.io/v1;
        objects of a CRD served in several versions carry the version they were asked for."""
        shown = obj.get("apiVersion")
        if shown == rtype.api_version:
            return obj
        convert = CONVERSIONS.get((rtype.kind, str(shown), rtype.api_version))
        if convert is not None:
            return convert(obj)
        return {**obj, "apiVersion": rtype.api_version}

    def _served(self, rtype: ResourceType, stored: Obj) -> Obj:
        """A stored object to be written through a type that serves another type's storage, in its own shape."""
        return self._present(rtype, stored) if rtype.stored_as else stored

    def _stored(self, rtype: ResourceType, obj: Obj) -> Obj:
        """An object written through ``rtype`` as its storage keeps it (an events.k8s.io/v1 Event as core v1)."""
        if not rtype.stored_as:
            return obj
        owner = self.registry.by_key(rtype.key)[0]
        convert = CONVERSIONS[(rtype.kind, rtype.api_version, owner.api_version)]
        return convert(obj)

    # --- create ----------------------------------------------------------------------------------------------

    async def create(
        self, rtype: ResourceType, namespace: str, body: Any, dry_run: bool = False, manager: str = ""
    ) -> Obj:
        return await self._create(rtype, namespace, self._decode_body(rtype, body), dry_run, manager)

    async def _create(
        self, rtype: ResourceType, namespace: str, obj: Obj, dry_run: bool, manager: str | None
    ) -> Obj:
        """``manager`` None: the object's managedFields are already decided (a server-side apply made it)."""
        meta = as_dict(obj.setdefault("metadata", {}))
        if not isinstance(obj["metadata"], dict):
            raise _error(400, "BadRequest", "metadata must be an object")
        self._check_namespace(rtype, namespace, meta)
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self._generated_name(rtype, namespace, str(meta["generateName"]))
        now = self.clock()
        for system_field in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            meta.pop(system_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = format_time(now)
        strategy = self.registry.strategy(rtype)
        if why := strategy.create_forbidden():
            raise ApiError(
                errors.forbidden_status(rtype.plural, rtype.group, str(meta.get("name") or ""), why)
            )
        if strategy.tracks_generation:
            meta["generation"] = 1
        strategy.default(obj)
        if manager is not None:
            self._record_update(rtype, obj, schemas.zero_object(rtype.group, rtype.kind), manager, "")
        self._raise_invalid(rtype, obj, strategy.allocate(obj, None, self._peers(rtype)))
        strategy.prepare_create(obj, now)
        self._raise_invalid(rtype, obj, strategy.validate_create(obj))
        strategy.canonicalize(obj)
        gojson.omit_empty(rtype.api_version, rtype.kind, obj)
        drop_empty_metadata(obj)
        self._check_creatable_in(rtype, namespace, str(metadata(obj).get("name")))
        if dry_run:
            return obj  # never stored: no resourceVersion, as upstream answers
        return self._present(rtype, await self.store.put(rtype.key, self._stored(rtype, obj)))

    def _generated_name(self, rtype: ResourceType, namespace: str, prefix: str) -> str:
        prefix = prefix[: 63 - 5]
        for _ in range(8):
            candidate = prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            if self.store.latest(rtype.key, namespace if rtype.namespaced else "", candidate) is None:
                return candidate
        raise _error(409, "AlreadyExists", f"no unique name could be generated from {prefix!r}")

    def _check_namespace(self, rtype: ResourceType, namespace: str, meta: Obj) -> None:
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return
        given = meta.get("namespace")
        if given and given != namespace:
            raise _error(400, "BadRequest", NAMESPACE_MISMATCH)
        meta["namespace"] = namespace

    def _check_creatable_in(self, rtype: ResourceType, namespace: str, name: str) -> None:
        if rtype.namespaced:
            ns = self.store.latest("namespaces", "", namespace)
            if ns is None:
                raise ApiError(errors.not_found_status("namespaces", "", namespace))
            if metadata(ns).get("deletionTimestamp"):
                raise _error(
                    403,
                    "Forbidden",
                    f'{_what(rtype)} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                    "because it is being terminated",
                    {"name": name, "group": rtype.group, "kind": rtype.plural},
                )
        if self.store.latest(rtype.key, namespace if rtype.namespaced else "", name) is not None:
            raise ApiError(errors.already_exists_status(rtype.plural, rtype.group, name))

    # --- update and patch ------------------------------------------------------------------------------------

    async def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
        manager: str | None = "",
    ) -> Obj:
        """``manager`` None records no field manager: a write the server makes on its own account."""
        new = self._decode_body(rtype, body)
        meta = metadata(new)
        _check_name(meta, name)
        old = self._served(rtype, self._current(rtype, namespace, name))
        given_rv = meta.get("resourceVersion")
        if given_rv and given_rv != metadata(old).get("resourceVersion"):
            raise ApiError(errors.conflict_status(rtype.plural, rtype.group, name, MODIFIED_MESSAGE))
        return await self._write_update(rtype, new, old, subresource, dry_run, manager)

    async def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> Obj:
        old = self._served(rtype, self._current(rtype, namespace, name))
        base = old  # every patch function returns a new object and leaves its input alone
        try:
            if content_type == JSON_PATCH:
                new = patches.apply_json_patch(base, body)
            elif content_type == MERGE_PATCH:
                new = patches.apply_merge_patch(base, body)
            elif content_type == STRATEGIC_PATCH and rtype.schema is None:
                new = patches.apply_strategic_merge_patch(base, body, rtype.group, rtype.kind)
            elif rtype.schema is not None:
                # Custom resources have no strategic merge; their handler names the types it takes.
                raise _error(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    f"{JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
                )
            else:
                raise _error(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
        except patches.PatchError as exc:
            if not exc.told:
                raise _error(422, "Invalid", INVALID_REQUEST, {}) from exc
            raise _error(exc.code, exc.reason, str(exc)) from exc
        if not isinstance(new, dict):
            raise _error(422, "Invalid", "the patch must produce an object")
        if rtype.schema is None and (problem := gotypes.type_error(rtype.api_version, rtype.kind, new)):
            # Upstream decodes the patched JSON into the kind's Go type and names the whole document: its
            # top-level keys sorted (the patch went through a map), the rest as stored.
            typed = sorted({"apiVersion": rtype.api_version, "kind": rtype.kind, **new}.items())
            patched = json.dumps(dict(typed), separators=(",", ":"))
            raise ApiError(errors.invalid_status("", "", "", [errors.invalid("patch", patched, problem)]))
        patched_rv = metadata(new).get("resourceVersion")
        if patched_rv and patched_rv != metadata(old).get("resourceVersion"):
            raise ApiError(errors.conflict_status(rtype.plural, rtype.group, name, MODIFIED_MESSAGE))
        return await self._write_update(rtype, new, old, subresource, dry_run, manager)

    async def apply(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        config: Obj,
        subresource: str,
        dry_run: bool,
        manager: str,
        force: bool,
    ) -> tuple[Obj, bool]:
        """Server-side apply of ``config`` as ``manager``; the object, and whether it was created."""
        current = self.store.latest(rtype.key, namespace if rtype.namespaced else "", name)
        if current is not None:
            current = self._served(rtype, current)
        if current is None and subresource:
            raise ApiError(errors.not_found_status(rtype.plural, rtype.group, name))
        zero = {
            "apiVersion": rtype.api_version,
            "kind": rtype.kind,
            **schemas.zero_object(rtype.group, rtype.kind),
        }
        live = current if current is not None else zero
        try:
            applied = managedfields.on_apply(
                live, config, manager, force, self._context(rtype, subresource), zero
            )
        except smd.Conflicts as exc:
            raise ApiError(managedfields.conflict_status(exc.conflicts)) from exc
        except smd.SchemaError as exc:  # a list item the configuration cannot key: the client's mistake
            raise ApiError(errors.bad_request_status(f"failed to create typed patch object: {exc}")) from exc
        except managedfields.ApplyError as exc:
            if exc.code == 400:
                raise ApiError(errors.bad_request_status(str(exc))) from exc
            # Upstream answers these as errors of its own, with no reason.
            status = errors.status(exc.code, "", str(exc))
            del status["reason"]
            raise ApiError(status) from exc
        new = applied.obj if applied.obj is not None else managedfields.without_managed_fields(live)
        meta = as_dict(new.setdefault("metadata", {}))
        if applied.managed_fields is None:
            meta.pop("managedFields", None)
        else:
            meta["managedFields"] = self._own_group_entries(rtype, applied.managed_fields)
        if current is None and meta.get("uid"):
            why = f"uid mismatch: the provided object specified uid {meta['uid']}, and no existing object was found"
            raise ApiError(errors.conflict_status(rtype.plural, rtype.group, name, why))
        if rtype.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise _error(400, "BadRequest", NAMESPACE_MISMATCH)
        if not meta.get("name"):
            message = (
                f"the name of the object ({name} based on URL) was undeterminable: name must be provided"
            )
            raise _error(400, "BadRequest", message)
        if meta["name"] != name:
            message = f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            raise _error(400, "BadRequest", message)
        if current is None:
            return await self._create(rtype, namespace, new, dry_run, None), True
        given_rv = meta.get("resourceVersion")
        if given_rv and given_rv != metadata(current).get("resourceVersion"):
            raise ApiError(errors.conflict_status(rtype.plural, rtype.group, name, MODIFIED_MESSAGE))
        return await self._write_update(rtype, new, current, subresource, dry_run, None), False

    def _context(self, rtype: ResourceType, subresource: str) -> managedfields.Context:
        reset = self.registry.strategy(rtype).reset_fields(subresource)
        return managedfields.Context(
            kind_structure(rtype),
            rtype.api_version,
            rtype.kind,
            subresource,
            format_time(self.clock()),
            managedfields.reset_fields(reset),
        )

    def _record_update(self, rtype: ResourceType, new: Obj, old: Obj, manager: str, subresource: str) -> None:
        """Record ``manager``'s write in ``new``'s managedFields (or drop them: an untracked object stays so)."""
        entries = managedfields.on_update(old, new, manager, self._context(rtype, subresource))
        meta = as_dict(new.setdefault("metadata", {}))
        if entries is None:
            meta.pop("managedFields", None)
        else:
            meta["managedFields"] = self._own_group_entries(rtype, entries)

    def _own_group_entries(self, rtype: ResourceType, entries: list[Obj]) -> list[Obj]:
        """Of an object served in two groups (Events), the entries of the group written through: upstream cannot
        carry the other group's field sets over a write and drops them."""
        if not any(t.group != rtype.group for t in self.registry.by_key(rtype.key)):
            return entries
        return [e for e in entries if str(e.get("apiVersion") or "").rpartition("/")[0] == rtype.group]

    async def replace(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        subresource: str = "",
        dry_run: bool = False,
        manager: str = "",
    ) -> tuple[Obj, bool]:
        """A PUT: an update, or a create for kinds that allow it when nothing has the name; whether it created."""
        key = (namespace if rtype.namespaced else "", name)
        missing = self.store.latest(rtype.key, *key) is None
        if missing and not subresource and self.registry.strategy(rtype).allow_create_on_update:
            decoded = self._decode_body(rtype, body)
            meta = as_dict(decoded.get("metadata"))
            _check_name(meta, name)
            return await self.create(
                rtype, namespace, {**decoded, "metadata": {**meta, "name": name}}, dry_run, manager
            ), True
        return await self.update(rtype, namespace, name, body, subresource, dry_run, manager), False

    def _peers(self, rtype: ResourceType) -> Callable[[], list[Obj]]:
        return lambda: self.store.list_latest(rtype.key)

    def _current(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.latest(rtype.key, namespace if rtype.namespaced else "", name)
        if obj is None:
            raise ApiError(errors.not_found_status(rtype.plural, rtype.group, name))
        return obj

    async def _write_update(
        self, rtype: ResourceType, new: Obj, old: Obj, subresource: str, dry_run: bool, manager: str | None
    ) -> Obj:
        """``manager`` None: ``new``'s managedFields are already decided (a server-side apply)."""
        strategy = self.registry.strategy(rtype)
        new["apiVersion"] = old.get("apiVersion", rtype.api_version)
        new["kind"] = rtype.kind
        meta = as_dict(new.setdefault("metadata", {}))
        old_meta = metadata(old)
        for system_field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if system_field in old_meta:
                meta[system_field] = old_meta[system_field]
            else:
                meta.pop(system_field, None)
        meta["namespace"] = old_meta.get("namespace")
        if not rtype.namespaced:
            meta.pop("namespace", None)
        meta["name"] = old_meta.get("name")
        strategy.default(new)
        if manager is not None:
            self._record_update(rtype, new, old, manager, subresource)
        if subresource == "status":
            strategy.prepare_status_update(new, old)
            problems = strategy.validate_status_update(new, old)
        elif subresource == "finalize":
            strategy.prepare_finalize(new, old)
            problems = strategy.validate_finalize(new, old)
        else:
            self._raise_invalid(rtype, new, strategy.allocate(new, old, self._peers(rtype)))
            strategy.prepare_update(new, old)
            problems = strategy.validate_update(new, old)
        self._raise_invalid(rtype, new, problems)
        strategy.canonicalize(new)
        gojson.omit_empty(rtype.api_version, rtype.kind, new)
        drop_empty_metadata(new)
        if self._finalizers_added_while_deleting(new, old):
            raise _error(
                422,
                "Invalid",
                f'{errors.qualified_kind(rtype.kind, rtype.storage_group)} "{old_meta.get("name")}" is invalid: '
                "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
            )
        if strategy.tracks_generation and _spec_changed(new, old):
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if _only_times_moved(new, old):
            meta["managedFields"] = old_meta["managedFields"]
        if new == old or dry_run:
            return self._present(rtype, new if dry_run else old)
        if _ready_to_go(rtype, new):
            return self._present(rtype, await self._finalize(rtype, new))
        return self._present(rtype, await self.store.put(rtype.key, self._stored(rtype, new)))

    @staticmethod
    def _finalizers_added_while_deleting(new: Obj, old: Obj) -> bool:
        if not metadata(old).get("deletionTimestamp"):
            return False
        return bool(set(_finalizers(new)) - set(_finalizers(old)))

    async def _finalize(self, rtype: ResourceType, obj: Obj) -> Obj:
        """The last finalizer is gone: the object leaves the store."""
        meta = metadata(obj)
        removed = await self.store.remove(rtype.key, str(meta.get("namespace") or ""), str(meta.get("name")))
        return removed if removed is not None else obj

    # --- delete ----------------------------------------------------------------------------------------------

    async def delete(
        self, rtype: ResourceType, namespace: str, name: str, options: Obj, dry_run: bool = False
    ) -> Obj:
        strategy = self.registry.strategy(rtype)
        if why := strategy.delete_forbidden(name):
            raise ApiError(errors.forbidden_status(rtype.plural, rtype.group, name, why))
        check_propagation(options)
        old = self._current(rtype, namespace, name)
        self._check_preconditions(rtype, old, as_dict(options.get("preconditions")))
        obj = copy.deepcopy(old)
        meta = metadata(obj)
        now = self.clock()
        if not meta.get("deletionTimestamp") and strategy.mark_deleting(obj, now):
            return self._present(rtype, obj if dry_run else await self.store.put(rtype.key, obj))
        grace = strategy.grace_period_seconds(obj, _int_or_none(options.get("gracePeriodSeconds")))
        finalizers = list(_finalizers(obj))
        policy = _propagation(options, strategy)
        if policy == ORPHAN and ORPHAN_FINALIZER not in finalizers:
            finalizers.append(ORPHAN_FINALIZER)
        elif policy == FOREGROUND and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if policy != ORPHAN and ORPHAN_FINALIZER in finalizers and not meta.get("deletionTimestamp"):
            finalizers.remove(ORPHAN_FINALIZER)
        namespace_finalizers = (
            as_list(as_dict(obj.get("spec")).get("finalizers")) if rtype.key == "namespaces" else []
        )
        if not finalizers and not namespace_finalizers and grace == 0:
            removed = None
            if not dry_run:
                removed = await self.store.remove(rtype.key, str(meta.get("namespace") or ""), name)
            if rtype.key in RETURN_DELETED_OBJECT:
                return self._present(rtype, removed or old)
            return _deleted_status(rtype, old)
        already_deleting = bool(meta.get("deletionTimestamp"))
        if already_deleting:
            current_grace = _int_or_none(meta.get("deletionGracePeriodSeconds")) or 0
            if grace >= current_grace and finalizers == list(_finalizers(old)):
                return self._present(rtype, old)
        if not already_deleting and isinstance(meta.get("generation"), int) and meta["generation"] > 0:
            meta["generation"] += 1  # controllers see that deletion began, as upstream bumps it
        meta["deletionTimestamp"] = format_time(now + timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace
        if finalizers:
            meta["finalizers"] = finalizers
        if rtype.key == "namespaces":
            obj.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return self._present(rtype, obj)
        return self._present(rtype, await self.store.put(rtype.key, obj))

    def _check_preconditions(self, rtype: ResourceType, obj: Obj, preconditions: Obj) -> None:
        meta = metadata(obj)
        checks = (
            ("uid", "UID", "deleted and then recreated"),
            ("resourceVersion", "ResourceVersion", "modified"),
        )
        for field, label, why in checks:
            wanted = preconditions.get(field)
            if wanted and wanted != meta.get(field):
                # Upstream names the kind here, not the resource, in the message and in details.
                raise ApiError(
                    errors.conflict_status(
                        rtype.kind,
                        rtype.storage_group,
                        str(meta.get("name")),
                        f"the {label} in the precondition ({wanted}) does not match the {label} in record "
                        f"({meta.get(field)}). The object might have been {why}",
                    )
                )

    async def remove_finalizer(self, rtype: ResourceType, obj: Obj, finalizer: str) -> None:
        """Used by the garbage collector once it has done what a system finalizer promises."""
        current = self.store.latest(
            rtype.key, str(metadata(obj).get("namespace") or ""), str(metadata(obj).get("name"))
        )
        if current is None or finalizer not in _finalizers(current):
            return
        updated = copy.deepcopy(current)
        remaining = [f for f in _finalizers(updated) if f != finalizer]
        if remaining:
            metadata(updated)["finalizers"] = remaining
        else:
            metadata(updated).pop("finalizers", None)
        await self._put_or_finalize(rtype, updated)

    async def finalize_namespace(self, name: str) -> None:
        """The namespace is empty: drop its ``kubernetes`` finalizer so it can go."""
        rtype = self.registry.by_key("namespaces")[0]
        current = self.store.latest("namespaces", "", name)
        if current is None or NAMESPACE_FINALIZER not in _namespace_finalizers(rtype, current):
            return  # another finalizer holds it: whoever owns that one removes it through /finalize
        updated = copy.deepcopy(current)
        updated["spec"]["finalizers"] = [
            f for f in _namespace_finalizers(rtype, updated) if f != NAMESPACE_FINALIZER
        ]
        await self._put_or_finalize(rtype, updated)

    async def _put_or_finalize(self, rtype: ResourceType, obj: Obj) -> None:
        if _ready_to_go(rtype, obj):
            await self._finalize(rtype, obj)
        else:
            await self.store.put(rtype.key, obj)

    # --- helpers ---------------------------------------------------------------------------------------------

    def _decode_body(self, rtype: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise _error(400, "BadRequest", f"the body must be a {rtype.kind} object")
        # Bodies are freshly decoded request JSON or copies made by in-process callers: ours to change.
        obj = dict(body)
        api_version = obj.get("apiVersion") or rtype.api_version
        kind = obj.get("kind") or rtype.kind
        if kind != rtype.kind and rtype.schema is not None:
            name = str(as_dict(obj.get("metadata")).get("name") or "")
            problem = errors.invalid("kind", kind, f"must be {rtype.kind}")
            raise ApiError(errors.invalid_status(str(kind), rtype.group, name, [problem]))
        version = str(api_version).rpartition("/")[2]
        cannot = f'{kind} in version "{version}" cannot be handled as a {rtype.kind}'
        registered = any(t.api_version == api_version and t.kind == kind for t in self.registry)
        if not registered and rtype.schema is None:
            raise _error(
                400,
                "BadRequest",
                f'{cannot}: no kind "{kind}" is registered for version "{api_version}" in scheme '
                '"pkg/runtime/scheme.go:111"',
            )
        if kind != rtype.kind:
            # Go decodes the kind the body names, then finds no conversion to the one the path names.
            internal = rtype.group.split(".")[0] or "core"
            detail = f"converting ({version}.{kind}) to ({internal}.{rtype.kind}): unknown conversion"
            raise _error(400, "BadRequest", f"{cannot}: {detail}")
        if api_version != rtype.api_version:
            raise _error(
                400,
                "BadRequest",
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rtype.api_version})",
            )
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        if "metadata" in obj and not isinstance(obj["metadata"], dict):
            raise _error(400, "BadRequest", "metadata must be an object")
        return obj

    @staticmethod
    def _raise_invalid(rtype: ResourceType, obj: Obj, problems: list[errors.FieldError]) -> None:
        if problems:
            name = str(metadata(obj).get("name") or metadata(obj).get("generateName") or "")
            raise ApiError(errors.invalid_status(rtype.kind, rtype.storage_group, name, problems))


def _check_name(meta: Obj, name: str) -> None:
    if meta.get("name") not in (None, name):
        raise _error(
            400,
            "BadRequest",
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})",
        )


def _deleted_status(rtype: ResourceType, old: Obj) -> Obj:
    """What upstream answers to a delete that removed the object at once."""
    details: Obj = {"name": metadata(old).get("name"), "kind": rtype.plural, "uid": metadata(old).get("uid")}
    if rtype.group:
        details = {"name": details["name"], "group": rtype.group, **details}
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def check_propagation(options: Obj) -> None:
    """A propagationPolicy upstream does not know is refused before anything is looked up."""
    policy = options.get("propagationPolicy")
    if policy is None or policy in (BACKGROUND, FOREGROUND, ORPHAN):
        return
    problem = errors.not_supported("propagationPolicy", policy, [FOREGROUND, BACKGROUND, ORPHAN, "nil"])
    status = errors.invalid_status("DeleteOptions", "meta.k8s.io", "", [problem])
    status["details"].pop("name", None)  # no object has a name here: upstream leaves it out
    raise ApiError(status)


def _finalizers(obj: Obj) -> list[str]:
    return [str(f) for f in as_list(metadata(obj).get("finalizers"))]


def _ready_to_go(rtype: ResourceType, obj: Obj) -> bool:
    """Being deleted, no finalizer left, and no grace period still running (a kubelet ends that one)."""
    meta = metadata(obj)
    grace = _int_or_none(meta.get("deletionGracePeriodSeconds")) or 0
    return (
        bool(meta.get("deletionTimestamp"))
        and grace == 0
        and not _finalizers(obj)
        and not _namespace_finalizers(rtype, obj)
    )


def _namespace_finalizers(rtype: ResourceType, obj: Obj) -> list[Any]:
    return as_list(as_dict(obj.get("spec")).get("finalizers")) if rtype.key == "namespaces" else []


def _only_times_moved(new: Obj, old: Obj) -> bool:
    """A write that changes nothing but the times of managedFields entries changes nothing, as upstream holds."""
    entries, old_entries = metadata(new).get("managedFields"), metadata(old).get("managedFields")
    if not entries or entries == old_entries:
        return False
    if managedfields.without_times(entries) != managedfields.without_times(old_entries):
        return False
    return managedfields.without_managed_fields(new) == managedfields.without_managed_fields(old)


def _spec_changed(new: Obj, old: Obj) -> bool:
    ignored = ("metadata", "status", "apiVersion", "kind")
    return {k: v for k, v in new.items() if k not in ignored} != {
        k: v for k, v in old.items() if k not in ignored
    }


def _propagation(options: Obj, strategy: Strategy) -> str:
    policy = options.get("propagationPolicy")
    if policy in (BACKGROUND, FOREGROUND, ORPHAN):
        return str(policy)
    if policy:
        raise _error(
            422,
            "Invalid",
            f'propagationPolicy: Unsupported value: "{policy}": supported values: "Foreground", "Background", "Orphan"',
        )
    orphan = options.get("orphanDependents")
    if orphan is True:
        return ORPHAN
    if orphan is False:
        return BACKGROUND
    return strategy.default_propagation


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    """A continue token's snapshot resourceVersion and the (namespace, name) its page starts after; 400 when
    it cannot be used."""
    try:
        rv, namespace, name = continuation.decode(token)
    except continuation.ContinueError as exc:
        raise _error(400, "BadRequest", f"invalid continue token: {exc}") from exc
    return rv, (namespace, name)
