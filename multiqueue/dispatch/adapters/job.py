"""The GenericJob adapter of batch/v1 Job."""

from __future__ import annotations

from multiqueue.api import fastjson, jobs, jobstatus
from multiqueue.api.meta import as_dict, as_list, condition_is_true
from multiqueue.api.types import JOBS, Obj
from multiqueue.dispatch.generic import Finish, PodSet, StatusRefused, finish_of, pod_requests
from multiqueue.dispatch.mirror import strip_for_mirror


class BatchJobAdapter:
    """batch/v1 Job."""

    resource = JOBS

    def managed_by(self, obj: Obj) -> str | None:
        return jobs.managed_by(obj)

    def is_suspended(self, obj: Obj) -> bool:
        return jobs.is_suspended(obj)

    def is_finished(self, obj: Obj) -> bool:
        return jobs.is_finished(obj)

    def finish(self, obj: Obj) -> Finish | None:
        return finish_of(jobs.conditions_of(obj), jobs.COMPLETE, jobs.FAILED)

    def build_mirror(self, obj: Obj, origin: str) -> Obj:
        """managedBy removed so the worker's Job controller runs it; the generated selector and labels dropped so
        the worker generates its own for the mirror's new UID; the user's TTL stays on the user's Job."""
        mirror = strip_for_mirror(obj, origin)
        spec = as_dict(mirror.get("spec"))
        spec.pop("managedBy", None)
        spec.pop("ttlSecondsAfterFinished", None)
        spec["suspend"] = False
        if spec.get("manualSelector") is not True:
            spec.pop("selector", None)
            spec.pop("manualSelector", None)
            template_meta = as_dict(as_dict(spec.get("template")).get("metadata"))
            # Defaulting copied them onto the Job's own labels too; both name the user's Job, not the mirror.
            for labels in (
                as_dict(template_meta.get("labels")),
                as_dict(as_dict(mirror.get("metadata")).get("labels")),
            ):
                for generated in (
                    jobs.CONTROLLER_UID_LABEL,
                    jobs.LEGACY_CONTROLLER_UID_LABEL,
                    jobs.JOB_NAME_LABEL,
                    jobs.LEGACY_JOB_NAME_LABEL,
                ):
                    labels.pop(generated, None)
        return mirror

    def suspend_patch(self, suspend: bool) -> Obj:
        return {"spec": {"suspend": suspend}}

    def synced_status(self, user: Obj, mirror: Obj) -> Obj | None:
        """The mirror's status as the user's, or None when nothing changed; StatusRefused when it would break
        the Job status rules (the user's last valid status then stays)."""
        status: Obj = fastjson.copied(jobs.status_of(mirror))
        # Pod UIDs of the worker mean nothing on the management cluster; counts carry the information.
        status.pop("uncountedTerminatedPods", None)
        mine = jobs.status_of(user)
        if (
            mine.get("startTime")
            and not jobs.is_suspended(user)
            and not condition_is_true(as_list(mine.get("conditions")), "Suspended")
        ):
            # A running Job keeps its start time when a later mirror (after a lost worker) takes over.
            status["startTime"] = mine["startTime"]
        if status == {k: v for k, v in jobs.status_of(user).items() if k != "uncountedTerminatedPods"}:
            return None
        new = {**user, "status": status}
        problems = jobstatus.validate_job_status_rules(new, user)
        if problems:
            raise StatusRefused("; ".join(str(p) for p in problems))
        return status

    def pod_sets(self, obj: Obj) -> list[PodSet]:
        spec = jobs.spec_of(obj)
        count = jobs.parallelism(obj)
        total = jobs.completions(obj)
        if total is not None:
            count = min(count, total)
        return [PodSet("main", count, pod_requests(spec.get("template")))]

    def priority_class(self, obj: Obj) -> str | None:
        pod_spec = as_dict(as_dict(jobs.spec_of(obj).get("template")).get("spec"))
        name = pod_spec.get("priorityClassName")
        return name if isinstance(name, str) and name else None

    def progress(self, obj: Obj) -> Obj | None:
        status = jobs.status_of(obj)
        kept = {
            k: status[k]
            for k in ("succeeded", "failed", "completedIndexes", "failedIndexes")
            if status.get(k)
        }
        return kept or None

    def rerun_status(self, obj: Obj) -> Obj:
        status: Obj = fastjson.copied(jobs.status_of(obj))
        status["active"] = 0
        for gauge in ("ready", "terminating"):
            if gauge in status:
                status[gauge] = 0
        return status
