"""Credentials for one cluster, read from a kubeconfig file and context with the official client's loader.

The official loader understands every credential kind (tokens, client certificates, CA files and data, exec
plugins, OIDC); we use it per cluster, never through the client's global default configuration, and turn what it
loads into an SSL context and an Authorization header that an aiohttp session can use. Exec-plugin and OIDC
credentials expire: :meth:`Credentials.auth_headers` refreshes them when due, and after a 401 when asked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes.aio.client import Configuration
from kubernetes.aio.config.config_exception import ConfigException
from kubernetes.aio.config.kube_config import KubeConfigLoader, _is_expired


class KubeconfigError(Exception):
    """The kubeconfig is missing, malformed, or asks for something we refuse (one line, naming the problem)."""


@dataclasses.dataclass
class Credentials:
    server: str
    ssl: ssl.SSLContext | bool
    context: str
    _loader: KubeConfigLoader
    _authorization: str | None
    _refreshable: bool

    async def auth_headers(self, force_refresh: bool = False) -> dict[str, str]:
        if self._refreshable:
            if force_refresh and hasattr(self._loader, "exec_plugin_expiry"):
                del self._loader.exec_plugin_expiry
            if force_refresh or not self._authorization or _expired(self._loader):
                self._authorization = await _refresh(self._loader)
        return {"Authorization": self._authorization} if self._authorization else {}


async def load_credentials(
    kubeconfig: Path | None = None,
    context: str | None = None,
    *,
    config_dict: dict[str, Any] | None = None,
    allow_insecure: bool = False,
    allow_exec: bool = True,
) -> Credentials:
    """Credentials of ``context`` (default: the current one) in a kubeconfig file or an already-parsed dict."""
    if config_dict is None and kubeconfig is None:
        config_dict = in_cluster_kubeconfig(os.environ)
        base = None
    elif config_dict is None:
        assert kubeconfig is not None
        config_dict = await asyncio.to_thread(_read_yaml, kubeconfig)
        base = str(kubeconfig.parent)
    else:
        base = None
    try:
        loader = KubeConfigLoader(config_dict=config_dict, config_base_path=base, active_context=context)
        user = loader._user
        if user is not None and "exec" in user and not allow_exec:
            raise KubeconfigError(
                f"context {loader.current_context['name']!r} uses an exec credential plugin, which is not allowed here"
            )
        configuration = Configuration()
        await loader.load_and_set(configuration)
    except ConfigException as exc:
        raise KubeconfigError(f"invalid kubeconfig: {exc}") from exc
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise KubeconfigError(f"invalid kubeconfig: {exc}") from exc
    if not configuration.verify_ssl and not allow_insecure:
        raise KubeconfigError(
            f"context {loader.current_context['name']!r} sets insecure-skip-tls-verify; refusing it unless explicitly allowed"
        )
    host = str(configuration.host or "").rstrip("/")
    if not host.startswith(("http://", "https://")):
        raise KubeconfigError(f"cluster server {host!r} is not an http(s) URL")
    token = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    # Service-account tokens are rotated on disk: a 401 re-reads the file.
    refreshable = user is not None and ("exec" in user or "auth-provider" in user or "tokenFile" in user)
    return Credentials(
        server=host,
        ssl=_ssl_context(configuration) if host.startswith("https://") else False,
        context=str(loader.current_context["name"]),
        _loader=loader,
        _authorization=_header(token),
        _refreshable=refreshable,
    )


SERVICE_ACCOUNT_DIR: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_kubeconfig(
    environ: Mapping[str, str], account_dir: Path = SERVICE_ACCOUNT_DIR
) -> dict[str, Any]:
    """A kubeconfig for the pod's own service account, as every in-cluster client builds it."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise KubeconfigError(
            "no kubeconfig given, and not running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset)"
        )
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "in-cluster",
                "cluster": {"server": server, "certificate-authority": str(account_dir / "ca.crt")},
            }
        ],
        "users": [{"name": "service-account", "user": {"tokenFile": str(account_dir / "token")}}],
        "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account"}}],
        "current-context": "in-cluster",
    }


_FILE_KEYS: Final = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def unsafe_kubeconfig_reason(config_dict: dict[str, Any]) -> str | None:
    """Why a kubeconfig handed over in a Secret may not be used as is: it names local files, or runs a program.

    Whoever writes such a Secret would choose what the manager reads from its disk or executes.
    """
    for section, keys in _FILE_KEYS.items():
        for entry in config_dict.get(f"{section}s") or []:
            body = entry.get(section) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key in keys:
                if body.get(key):
                    return f"{section} {entry.get('name')!r} reads the local file {key} {body[key]!r}"
            if section == "user":
                for plugin in ("exec", "auth-provider"):
                    if body.get(plugin):
                        return f"user {entry.get('name')!r} runs the credential plugin {plugin}"
    return None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML") from exc
    if not isinstance(data, dict):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig")
    return data


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    context = (
        ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        if configuration.ssl_ca_cert
        else ssl.create_default_context()
    )
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _expired(loader: KubeConfigLoader) -> bool:
    expiry = getattr(loader, "exec_plugin_expiry", None)
    return expiry is not None and bool(_is_expired(expiry))


def _header(token: Any) -> str | None:
    """The loader keeps ``Bearer <token>`` (or ``Basic ...``); a bare token gets the Bearer scheme."""
    if not isinstance(token, str) or not token:
        return None
    return token if token.split(" ", 1)[0] in ("Bearer", "Basic") else f"Bearer {token}"


async def _refresh(loader: KubeConfigLoader) -> str | None:
    user = loader._user
    if user is not None and "exec" in user:
        await loader.load_from_exec_plugin()
    else:
        await loader._load_authentication()
    return _header(getattr(loader, "token", None))
