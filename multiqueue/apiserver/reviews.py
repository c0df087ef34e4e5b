"""The review kinds a client creates to ask about itself: SelfSubjectAccessReview (``kubectl auth can-i``) and
SelfSubjectReview (``kubectl auth whoami``). Nothing is stored; the answer is the request with its status filled in.

A review names the user the request authenticated as (the admin token's, or a ServiceAccount's:
:mod:`multiqueue.apiserver.authentication`); whoever it is may do everything, since the embedded server
enforces no RBAC.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Final

from multiqueue.api import errors
from multiqueue.api.meta import as_dict, format_time
from multiqueue.api.types import Obj
from multiqueue.apiserver.resources import ResourceType
from multiqueue.apiserver.rest import ApiError

SELF_SUBJECT_ACCESS_REVIEWS: Final = "authorization.k8s.io/selfsubjectaccessreviews"
SELF_SUBJECT_REVIEWS: Final = "authentication.k8s.io/selfsubjectreviews"


def is_review(rtype: ResourceType) -> bool:
    return rtype.key in (SELF_SUBJECT_ACCESS_REVIEWS, SELF_SUBJECT_REVIEWS)


def answer(rtype: ResourceType, body: Any, now: datetime, user: Obj) -> Obj:
    """The review with its status, for ``user`` (its userInfo); :class:`ApiError` (400 for a body that is no
    object, 422 Invalid) where upstream refuses it."""
    if not isinstance(body, dict):
        raise ApiError(errors.bad_request_status(f"the body must be a {rtype.kind} object"))
    review = copy.deepcopy(body)
    review["apiVersion"], review["kind"] = rtype.api_version, rtype.kind
    if rtype.key == SELF_SUBJECT_REVIEWS:
        review["metadata"] = {**as_dict(review.get("metadata")), "creationTimestamp": format_time(now)}
        review["status"] = {"userInfo": copy.deepcopy(user)}
        return review
    spec = as_dict(review.get("spec"))
    if ("resourceAttributes" in spec) == ("nonResourceAttributes" in spec):
        # Upstream names neither the kind nor the object here.
        problem = errors.invalid(
            "spec", None, "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
        raise ApiError(errors.invalid_status("", rtype.group, "", [problem]))
    review["metadata"] = as_dict(review.get("metadata"))
    review["status"] = {"allowed": True}
    return review
