"""Placement's scores: among the workers every filter passed, which one takes the Job.

The worker affinity's preferred terms rank first (the highest summed weight wins); among the workers tied there,
the manager's policy decides: LeastLoaded (fewest Jobs, then name), Ordered (the config's order), RoundRobin (the
dispatch counter's turn). Without preferred terms every worker ties on affinity, so the policy alone decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeVar

from multiqueue.dispatch.affinity import Affinity

LEAST_LOADED: Final = "LeastLoaded"
ROUND_ROBIN: Final = "RoundRobin"
ORDERED: Final = "Ordered"  # the config's worker order, first that fits: primary/backup setups
POLICIES: Final = (LEAST_LOADED, ROUND_ROBIN, ORDERED)


class Scored(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> dict[str, str]: ...
    @property
    def load(self) -> int: ...


W = TypeVar("W", bound=Scored)

# A policy's score of each worker (higher is better); ties go to the name that sorts first.
PolicyScore = Callable[[Sequence[Scored], int], dict[str, float]]


def least_loaded(workers: Sequence[Scored], _turn: int) -> dict[str, float]:
    return {w.name: -float(w.load) for w in workers}


def ordered(workers: Sequence[Scored], _turn: int) -> dict[str, float]:
    return {w.name: -float(i) for i, w in enumerate(workers)}


def round_robin(workers: Sequence[Scored], turn: int) -> dict[str, float]:
    if not workers:
        return {}
    chosen = workers[turn % len(workers)].name
    return {w.name: 1.0 if w.name == chosen else 0.0 for w in workers}


POLICY_SCORES: Final[dict[str, PolicyScore]] = {
    LEAST_LOADED: least_loaded,
    ORDERED: ordered,
    ROUND_ROBIN: round_robin,
}


def affinity_scores(affinity: Affinity, workers: Sequence[Scored]) -> dict[str, int]:
    """The summed weight of the preferred terms each worker matches."""
    return {w.name: affinity.weight(w.labels) for w in workers}


def policy_scores(policy: str, workers: Sequence[Scored], turn: int) -> dict[str, float]:
    """The policy's score of each worker (an unknown policy scores as LeastLoaded, as the manager places)."""
    return POLICY_SCORES.get(policy, least_loaded)(workers, turn)


def best(policy: str, workers: Sequence[Scored], turn: int, affinity: Affinity) -> str:
    """The worker that takes the Job among ``workers`` (not empty): the highest affinity weight, then the policy's
    pick among the workers tied on it."""
    tied = top_weighted(workers, affinity_scores(affinity, workers))
    return pick(tied, policy_scores(policy, tied, turn))


def top_weighted(workers: Sequence[W], weights: Mapping[str, int]) -> list[W]:
    """The workers (not empty) with the highest affinity weight among them."""
    top = max(weights[w.name] for w in workers)
    return [w for w in workers if weights[w.name] == top]


def pick(tied: Sequence[Scored], scores: Mapping[str, float]) -> str:
    """The policy's pick among workers tied on affinity: the best score, then the name that sorts first."""
    return min(tied, key=lambda w: (-scores[w.name], w.name)).name
