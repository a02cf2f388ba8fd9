"""State directory persistence across restarts, and the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import kubernetes
import yaml
from kubernetes import watch

from localcluster.testing import REPO_ROOT, ApiServer


def test_objects_and_resource_versions_survive_restart(tmp_path: Path):
    state = tmp_path / "state"
    with ApiServer.start(state_dir=state) as api, api.api_client() as c:
        core = kubernetes.client.CoreV1Api(c)
        core.create_namespace({"metadata": {"name": "keep"}})
        cm = core.create_namespaced_config_map(
            "keep", {"metadata": {"name": "cm"}, "data": {"a": "1"}}
        )
        core.patch_namespaced_config_map("cm", "keep", {"data": {"a": "2"}})
        core.create_namespaced_config_map("keep", {"metadata": {"name": "gone"}})
        core.delete_namespaced_config_map("gone", "keep")
        co = kubernetes.client.CustomObjectsApi(c)
        co.create_namespaced_custom_object(
            "haproxy-haptic.org",
            "v1alpha1",
            "keep",
            "haproxycfgs",
            {
                "apiVersion": "haproxy-haptic.org/v1alpha1",
                "kind": "HAProxyCfg",
                "metadata": {"name": "cfg"},
                "spec": {"path": "haproxy.cfg", "content": "x", "checksum": "sha256:1"},
            },
        )
        last_rv = int(core.list_namespaced_config_map("keep").metadata.resource_version)
    with ApiServer.start(state_dir=state) as api, api.api_client() as c:
        core = kubernetes.client.CoreV1Api(c)
        got = core.read_namespaced_config_map("cm", "keep")
        assert got.data == {"a": "2"} and got.metadata.uid == cm.metadata.uid
        assert [i.metadata.name for i in core.list_namespaced_config_map("keep").items] == ["cm"]
        cfg = kubernetes.client.CustomObjectsApi(c).get_namespaced_custom_object(
            "haproxy-haptic.org", "v1alpha1", "keep", "haproxycfgs", "cfg"
        )
        assert cfg["spec"]["content"] == "x"
        new = core.create_namespaced_config_map("keep", {"metadata": {"name": "after"}})
        assert int(new.metadata.resource_version) > last_rv


def test_crash_and_restart_on_the_same_port_keeps_state():
    with ApiServer.start() as api:
        with api.api_client() as c:
            core = kubernetes.client.CoreV1Api(c)
            core.create_namespaced_config_map("default", {"metadata": {"name": "survivor"}})
            rv = core.list_namespaced_config_map("default").metadata.resource_version
            core.patch_namespaced_config_map("survivor", "default", {"data": {"a": "1"}})
        url = api.url
        api.kill()
        api.restart()
        assert api.url == url
        with api.api_client() as c:
            core = kubernetes.client.CoreV1Api(c)
            assert core.read_namespaced_config_map("survivor", "default").metadata.uid
            # A watch resumes across the restart from a version seen before it.
            events = list(
                watch.Watch().stream(
                    core.list_namespaced_config_map,
                    "default",
                    resource_version=rv,
                    timeout_seconds=1,
                )
            )
            assert [(e["type"], e["object"].data) for e in events] == [("MODIFIED", {"a": "1"})]


def test_serve_writes_kubeconfig_and_stops_on_sigterm(tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "localcluster",
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=str(REPO_ROOT),
    )
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        url = next(x.split()[-1] for x in lines if x.startswith("apiserver listening on"))
        kubeconfig = yaml.safe_load((tmp_path / "kubeconfig").read_text())
        assert kubeconfig["clusters"][0]["cluster"]["server"] == url
        info = json.loads((tmp_path / "apiserver.json").read_text())
        assert info["url"] == url and info["admin_url"].startswith("http://127.0.0.1:")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_up_runs_the_api_with_the_node_and_stops_on_sigterm(tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "localcluster", "up", "--port", "0", "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=str(REPO_ROOT),
    )
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == "ready":
                break
        assert any("listening on" in x for x in lines), lines
        with kubernetes.config.new_client_from_config(str(tmp_path / "kubeconfig")) as c:
            names = [n.metadata.name for n in kubernetes.client.CoreV1Api(c).list_namespace().items]
        assert "default" in names
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_second_server_on_the_same_state_dir_is_refused(tmp_path: Path):
    import pytest

    with ApiServer.start(state_dir=tmp_path):
        with pytest.raises(RuntimeError) as err:
            ApiServer.start(state_dir=tmp_path).stop()
        assert "in use by another localcluster" in str(err.value)
