"""Certificates and keys for the real cluster, made with the `openssl` command line tool.

One CA signs the API server's serving certificate and every client certificate; the API
server maps a client certificate to a user (CN) and groups (O), which is how the admin
(system:masters), the controller manager, the scheduler and the node (system:node:NAME in
system:nodes, for the Node authorizer) are told apart. The service-account key pair signs
and verifies ServiceAccount tokens (ES256).

Every key is ECDSA P-256: the tests start a fresh control plane per end-to-end test, and
nine RSA-2048 keys cost about 1.6 s of CPU per start on this machine, against 0.05 s.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

DAYS = "3650"


@dataclass(frozen=True)
class ClientIdentity:
    """Who a client certificate says it is: the user name and its groups."""

    file_stem: str
    user: str
    groups: tuple[str, ...] = ()

    def subject(self) -> str:
        return "".join(f"/O={g}" for g in self.groups) + f"/CN={self.user}"


ADMIN = ClientIdentity("admin", "kubernetes-admin", ("system:masters",))
CONTROLLER_MANAGER = ClientIdentity("controller-manager", "system:kube-controller-manager")
SCHEDULER = ClientIdentity("scheduler", "system:kube-scheduler")
# The API server's client certificate towards kubelets (--kubelet-client-certificate): the
# node's kubelet endpoint serves pod logs to this user only (localcluster/node/kubeletapi.py).
KUBELET_CLIENT = ClientIdentity("apiserver-kubelet-client", "kube-apiserver-kubelet-client")


def node_identity(node_name: str) -> ClientIdentity:
    return ClientIdentity("node", f"system:node:{node_name}", ("system:nodes",))


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {result.stderr.strip()}")


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", path.name, cwd=path.parent)  # fmt: skip
    path.chmod(0o600)


def _signed(pki: Path, stem: str, subject: str, usage: str, names: tuple[str, ...] = ()) -> None:
    """A key and a leaf certificate for it signed by the CA: `usage` serverAuth or
    clientAuth, `names` its subject alternative names."""
    extensions = (
        f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage={usage}\n"
        + (f"subjectAltName={','.join(names)}\n" if names else "")
    )
    _key(pki / f"{stem}.key")
    _openssl("req", "-new", "-key", f"{stem}.key", "-subj", subject, "-out", f"{stem}.csr",
             cwd=pki)  # fmt: skip
    (pki / f"{stem}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", DAYS, "-sha256", "-extfile", f"{stem}.ext",
        "-out", f"{stem}.crt", cwd=pki,
    )  # fmt: skip
    (pki / f"{stem}.csr").unlink()
    (pki / f"{stem}.ext").unlink()


def kubelet_serving(pki: Path, node_name: str, address: str) -> tuple[Path, Path]:
    """The node's kubelet serving certificate and key for `address` (its InternalIP, which
    the API server dials and checks against --kubelet-certificate-authority), signed by the
    cluster CA; kept per address, so a restarted node with the same block reuses it."""
    stem = f"kubelet-{address}"
    if not (pki / f"{stem}.crt").exists():
        _signed(pki, stem, f"/CN={node_name}", "serverAuth", (f"IP:{address}", f"DNS:{node_name}"))
    return pki / f"{stem}.crt", pki / f"{stem}.key"


def ensure_pki(pki: Path, identities: list[ClientIdentity]) -> None:
    """Create what is missing under `pki` (a restart keeps the same CA and keys, so
    kubeconfigs and ServiceAccount tokens stay valid)."""
    pki.mkdir(parents=True, exist_ok=True)
    if not (pki / "ca.crt").exists():
        _key(pki / "ca.key")
        _openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=localcluster-ca",
                 "-days", DAYS, "-sha256", "-out", "ca.crt", cwd=pki)  # fmt: skip
    if not (pki / "apiserver.crt").exists():
        names = (
            "DNS:localhost", "DNS:kubernetes", "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local",
            "IP:127.0.0.1",
        )  # fmt: skip
        _signed(pki, "apiserver", "/CN=kube-apiserver", "serverAuth", names)
    for ident in identities:
        if not (pki / f"{ident.file_stem}.crt").exists():
            _signed(pki, ident.file_stem, ident.subject(), "clientAuth")
    if not (pki / "sa.key").exists():
        _key(pki / "sa.key")
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
