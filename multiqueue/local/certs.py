"""TLS for local clusters: one private CA per state directory and a serving certificate per cluster.

kubectl sends bearer tokens only over TLS, and real clusters speak HTTPS, so local ones do too. The CA and keys
live in the state directory (owner-only), are made once, and are reused on restart so kubeconfigs stay valid.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from multiqueue.loop.files import write_private

VALIDITY = datetime.timedelta(days=3650)


@dataclasses.dataclass(frozen=True)
class ServingCert:
    ca_file: Path
    cert_file: Path
    key_file: Path


def _key_bytes(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _ca(folder: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_file, key_file = folder / "ca.crt", folder / "ca.key"
    if cert_file.exists() and key_file.exists():
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return x509.load_pem_x509_certificate(cert_file.read_bytes()), key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "multiqueue-local-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    write_private(key_file, _key_bytes(key))
    write_private(cert_file, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def serving_cert(state_dir: Path, cluster: str, host: str) -> ServingCert:
    """The CA of ``state_dir`` and a certificate for ``host`` (plus localhost) signed by it, made on first use."""
    ca_cert, ca_key = _ca(state_dir)
    folder = state_dir / cluster
    cert_file, key_file = folder / "serving.crt", folder / "serving.key"
    if not (cert_file.exists() and key_file.exists()):
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"multiqueue-{cluster}")]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(names))), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        write_private(key_file, _key_bytes(key))
        write_private(cert_file, cert.public_bytes(serialization.Encoding.PEM))
    return ServingCert(state_dir / "ca.crt", cert_file, key_file)
