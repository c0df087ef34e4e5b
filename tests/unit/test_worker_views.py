"""WorkerViews: a sync's views of the workers, each made when first asked for, once."""

from __future__ import annotations

import pytest

from multiqueue.dispatch.placement import WorkerView, WorkerViews


def counting(names: list[str]) -> tuple[WorkerViews, list[str]]:
    made: list[str] = []

    def view(name: str) -> WorkerView:
        made.append(name)
        return WorkerView(name, {}, active=True, load=0)

    return WorkerViews(dict.fromkeys(names).keys(), view), made


@pytest.mark.parametrize(
    ("asked", "made"),
    [
        ([], []),  # len alone makes no view
        (["b"], ["b"]),  # a sync that looks at its own worker makes that view only
        (["b", "b"], ["b"]),  # once
        (["z"], []),  # no such worker: None, nothing made
        (["b", "*"], ["b", "a", "c"]),  # all of them ("*"), the one made already kept
        (["*", "*", "c"], ["a", "b", "c"]),
    ],
)
def test_views_are_made_when_first_asked_for(asked: list[str], made: list[str]) -> None:
    views, seen = counting(["a", "b", "c"])
    assert len(views) == 3 and "b" not in seen
    for name in asked:
        if name == "*":
            assert [v.name for v in views] == ["a", "b", "c"]
        else:
            got = views.get(name)
            assert (got is None) == (name == "z") and (got is None or got.name == name)
    assert seen == made


def test_made_views_read_like_the_list_they_were_made_from() -> None:
    listed = [WorkerView(n, {}, active=n != "b", load=i) for i, n in enumerate(["a", "b", "c"])]
    views = WorkerViews.of(listed)
    assert list(views) == listed and views[1] is listed[1] and views[-1] is listed[2]
    assert views[:2] == listed[:2] and len(views) == 3
    assert views.get("b") is listed[1] and views.get("d") is None
    assert [v.name for v in views if not v.active] == ["b"]
