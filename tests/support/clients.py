"""Clients of the kube/ layer pointed at in-process local API servers."""

from __future__ import annotations

from multiqueue.apiserver.server import ApiServer
from multiqueue.kube.client import ClientOptions, KubeClient
from multiqueue.kube.config import load_credentials
from tests.support.servers import kubeconfig_dict


async def client_for(
    server: ApiServer, name: str = "local", options: ClientOptions | None = None
) -> KubeClient:
    credentials = await load_credentials(config_dict=kubeconfig_dict(server, name))
    return KubeClient(credentials, name, options)
