"""A Kafka broker behind TLS for the tests of the secured client settings: the Tansu broker
(in-memory) with stunnel (Debian's `stunnel4`, scripts/system-packages) terminating TLS in front of
it, and a test CA that signed the server's certificate. Tansu advertises the stunnel address, so
every connection a client opens after the bootstrap goes through TLS too."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pin_chessboard_pipelines.runtime.embedded import free_port, tansu_binary, wait_for_port


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA that signed the server certificate (KAFKA_SSL_CA_LOCATION)
    other_ca: Path  # a CA that did not
    cert: Path
    key: Path


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _certificate(subject: str, key, issuer: str, issuer_key, *, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def make_tls_files(folder: Path) -> TlsFiles:
    """A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA."""
    ca_key, other_key, server_key = _key(), _key(), _key()
    ca = _certificate("pin-chessboard test CA", ca_key, "pin-chessboard test CA", ca_key, ca=True)
    other = _certificate("another CA", other_key, "another CA", other_key, ca=True)
    server = _certificate("127.0.0.1", server_key, "pin-chessboard test CA", ca_key, ca=False)
    key_pem = server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return TlsFiles(
        ca=_pem(folder / "ca.pem", ca.public_bytes(serialization.Encoding.PEM)),
        other_ca=_pem(folder / "other-ca.pem", other.public_bytes(serialization.Encoding.PEM)),
        cert=_pem(folder / "server.pem", server.public_bytes(serialization.Encoding.PEM)),
        key=_pem(folder / "server.key", key_pem),
    )


def stunnel_binary() -> str:
    found = shutil.which("stunnel4") or shutil.which("stunnel")
    if found is None:
        raise RuntimeError("stunnel is missing: scripts/system-packages installs the Debian package stunnel4")
    return found


@contextmanager
def _process(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def tls_broker(folder: Path, files: TlsFiles, *, authentication: bool = False) -> Iterator[str]:
    """Tansu on a plaintext port only stunnel uses, stunnel's TLS port advertised; yields the TLS
    bootstrap address. `authentication`: Tansu requires SASL (SCRAM) logins."""
    plain, tls = free_port(), free_port()
    broker = [
        tansu_binary(),
        "broker",
        "--listener-url",
        f"tcp://127.0.0.1:{plain}",
        "--advertised-listener-url",
        f"tcp://127.0.0.1:{tls}",
        "--storage-engine",
        "memory://tansu/",
    ] + (["--authentication"] if authentication else [])
    config = folder / f"stunnel-{tls}.conf"
    config.write_text(
        "foreground = yes\npid =\n[kafka]\n"
        f"accept = 127.0.0.1:{tls}\nconnect = 127.0.0.1:{plain}\ncert = {files.cert}\nkey = {files.key}\n"
    )
    with ExitStack() as stack:
        stack.enter_context(
            _process(broker, folder / f"tansu-{plain}.log", {**os.environ, "RUST_LOG": "warn"})
        )
        wait_for_port("127.0.0.1", plain)
        stack.enter_context(_process([stunnel_binary(), str(config)], folder / f"stunnel-{tls}.log"))
        wait_for_port("127.0.0.1", tls)
        yield f"127.0.0.1:{tls}"
