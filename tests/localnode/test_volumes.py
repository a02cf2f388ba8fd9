"""Volume files and mount path translation (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.node.podenv import EnvError
from localcluster.node.volumes import mount_map, translate, volume_files, volume_refs

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "b"}},
    "spec": {
        "volumes": [
            {"name": "token", "secret": {"secretName": "tok"}},
            {"name": "cfg", "configMap": {"name": "cm", "items": [{"key": "k", "path": "x/y"}]}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "host", "hostPath": {"path": "/srv/data"}},
            {
                "name": "info",
                "downwardAPI": {
                    "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]
                },
            },
        ]
    },
}


def test_refs_and_files() -> None:
    assert volume_refs(POD) == {("secret", "tok"), ("configmap", "cm")}
    refs = {("secret", "tok"): {"token": "s3cret"}, ("configmap", "cm"): {"k": "v", "z": "w"}}
    vols = {v["name"]: v for v in POD["spec"]["volumes"]}
    assert volume_files(vols["token"], POD, "127.1.1.1", "127.0.0.1", refs) == {"token": "s3cret"}
    assert volume_files(vols["cfg"], POD, "127.1.1.1", "127.0.0.1", refs) == {"x/y": "v"}
    assert volume_files(vols["info"], POD, "127.1.1.1", "127.0.0.1", refs) == {"name": "p"}
    assert volume_files(vols["scratch"], POD, "127.1.1.1", "127.0.0.1", refs) is None
    with pytest.raises(EnvError):
        volume_files(vols["token"], POD, "127.1.1.1", "127.0.0.1", {})
    optional = {"name": "o", "secret": {"secretName": "none", "optional": True}}
    assert volume_files(optional, POD, "127.1.1.1", "127.0.0.1", {}) == {}


def test_mount_map_and_translation(tmp_path: Path) -> None:
    container = {
        "volumeMounts": [
            {"name": "token", "mountPath": "/var/run/haptic"},
            {"name": "scratch", "mountPath": "/var/run/haptic/tmp"},
            {"name": "host", "mountPath": "/data", "subPath": "sub"},
        ]
    }
    mounts = mount_map(POD, container, tmp_path)
    assert mounts[0] == ("/var/run/haptic/tmp", str(tmp_path / "volumes" / "scratch"))
    local_token = str(tmp_path / "volumes" / "token")
    assert translate("/var/run/haptic/token", mounts) == f"{local_token}/token"
    assert (
        translate("--token-file=/var/run/haptic/token", mounts)
        == f"--token-file={local_token}/token"
    )
    assert (
        translate("/var/run/haptic/tmp/a", mounts) == str(tmp_path / "volumes" / "scratch") + "/a"
    )
    assert translate("/data", mounts) == "/srv/data/sub"
    # One pass: a rewritten path is not rewritten again by a mount at a prefix of it.
    nested = [("/opt/x", "/tmp/pods/p/volumes/x"), ("/tmp", "/tmp/pods/p/volumes/tmp")]
    assert (
        translate("/opt/x/f /tmp/g", nested) == "/tmp/pods/p/volumes/x/f /tmp/pods/p/volumes/tmp/g"
    )
    # Lookalikes are left alone.
    assert translate("/var/run/hapticX/token", mounts) == "/var/run/hapticX/token"
    assert translate("x/var/run/haptic", mounts) == "x/var/run/haptic"
    with pytest.raises(EnvError):
        mount_map(POD, {"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, tmp_path)


FRAGMENTS = ["/mnt/v", "/mnt/vx", "/mnt/v/f", "a", " ", "=", "/", ":", "x"]


@settings(deadline=None)  # a loaded 2-core machine must not fail on speed
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
def test_translation_only_touches_mount_paths(text: str) -> None:
    mounts = [("/mnt/v", "/local/v")]
    out = translate(text, mounts)
    # Only whole mount paths change, and the change is exactly the prefix swap.
    assert out.replace("/local/v", "/mnt/v") == text
    if "/mnt/v" not in text:
        assert out == text
    if text.startswith("/mnt/v/") or text == "/mnt/v":
        assert out.startswith("/local/v")
    if text.startswith("/mnt/vx"):
        assert out.startswith("/mnt/vx")
