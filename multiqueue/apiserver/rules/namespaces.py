"""Namespaces: names that are DNS labels and finalizers that are standard or fully qualified, as upstream."""

from __future__ import annotations

from typing import Final

from multiqueue.api.errors import FieldError, invalid
from multiqueue.api.meta import (
    STANDARD_FINALIZERS,
    as_dict,
    as_list,
    dns1123_label_errors,
    qualified_name_errors,
    validate_object_meta,
)
from multiqueue.api.types import Obj

KUBERNETES_FINALIZER: Final = "kubernetes"


def finalizer_name_errors(name: str) -> list[str]:
    """A finalizer is a qualified name; one without a domain must be one of the standard ones."""
    errs = qualified_name_errors(name)
    if "/" not in name and name not in STANDARD_FINALIZERS:
        errs.append("name is neither a standard finalizer name nor is it fully qualified")
    return errs


def spec_finalizers(ns: Obj) -> list[str]:
    return [str(f) for f in as_list(as_dict(ns.get("spec")).get("finalizers"))]


def validate_spec_finalizers(ns: Obj, *, indexed: bool = False) -> list[FieldError]:
    """Each of spec.finalizers; a create names the list, a /finalize each item (``indexed``), as upstream."""
    return [
        invalid(f"spec.finalizers[{i}]" if indexed else "spec.finalizers", finalizer, m)
        for i, finalizer in enumerate(spec_finalizers(ns))
        for m in finalizer_name_errors(finalizer)
    ]


def validate_namespace(ns: Obj) -> list[FieldError]:
    errs = validate_object_meta(ns.get("metadata"), namespaced=False, name_errors=dns1123_label_errors)
    return errs + validate_spec_finalizers(ns)
