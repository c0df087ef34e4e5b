"""multiqueue: dispatch Kubernetes batch Jobs from a management cluster to worker clusters."""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "multiqueue-dispatcher"  # the name on PyPI ("multiqueue" there is another project)

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
