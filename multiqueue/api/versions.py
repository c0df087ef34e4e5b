"""The Kubernetes release whose rules multiqueue follows: the embedded server reports it, and the upstream control
plane is built at it (hack/control-plane/go.mod pins the same release; a test keeps the two equal)."""

from __future__ import annotations

from typing import Final

KUBERNETES_VERSION: Final = "v1.37.2"
