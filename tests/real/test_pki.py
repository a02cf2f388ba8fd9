"""The real cluster's certificates: who each client certificate says it is (the API server
maps CN to the user and O to groups, which the Node authorizer and RBAC decide on)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from localcluster.real import pki

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _x509(path: Path, *args: str) -> str:
    return subprocess.run(
        ["openssl", "x509", "-in", str(path), "-noout", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_identities_serving_names_and_restart_keeps_the_ca(tmp_path: Path) -> None:
    node = pki.node_identity("localnode")
    pki.ensure_pki(tmp_path, [pki.ADMIN, node])
    subject = _x509(tmp_path / "node.crt", "-subject", "-nameopt", "RFC2253")
    assert "CN=system:node:localnode" in subject and "O=system:nodes" in subject
    assert "O=system:masters" in _x509(tmp_path / "admin.crt", "-subject", "-nameopt", "RFC2253")
    sans = _x509(tmp_path / "apiserver.crt", "-ext", "subjectAltName")
    assert "IP Address:127.0.0.1" in sans and "DNS:kubernetes.default.svc" in sans
    verify = subprocess.run(
        ["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "node.crt")],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stderr
    ca = (tmp_path / "ca.crt").read_bytes()
    pki.ensure_pki(tmp_path, [pki.ADMIN, node])
    assert (tmp_path / "ca.crt").read_bytes() == ca
    assert (tmp_path / "sa.pub").read_text().startswith("-----BEGIN PUBLIC KEY-----")


def test_every_key_is_ecdsa_p256(tmp_path: Path) -> None:
    """RSA-2048 keys made each control-plane start spend about 1.6 s of CPU (docs in
    localcluster/real/pki.py); the service-account key signs ES256 tokens."""
    pki.ensure_pki(tmp_path, [pki.ADMIN])
    for key in sorted(tmp_path.glob("*.key")):
        text = subprocess.run(
            ["openssl", "pkey", "-in", str(key), "-noout", "-text"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "prime256v1" in text, key.name
