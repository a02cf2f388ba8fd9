"""Start the local and the real API server, replay the corpus (and the kubectl workflow)
against both, and list every difference with its verdict from `known.yaml`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from localcluster.real.testing import RealApiServer
from localcluster.testing import ApiServer

from .replay import CORPUS_DIR, Replayer, difference


def replay(server: Any, corpus: list[dict[str, Any]], ns: str) -> dict[str, Any]:
    replayer = Replayer(server.api_client(), ns=ns)
    return {step["id"]: replayer.run(step) for step in corpus}


def normalize_kubectl(text: str, ns: str) -> str:
    """kubectl output without what legitimately differs (ages, versions, uids)."""
    lines = []
    for line in text.strip().splitlines():
        line = " ".join(line.split())
        lines.append(line)
    return "\n".join(lines)


def run_kubectl(kubeconfig: Path, ns: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Each step: args (with {ns}, {dir}); `background` runs it while the next steps run
    and stops it after them (get -w); stdin feeds a manifest."""
    answers: dict[str, Any] = {}
    background: tuple[str, subprocess.Popen[str]] | None = None
    for step in steps:
        args = [a.replace("{ns}", ns) for a in step["args"]]
        cmd = ["kubectl", "--kubeconfig", str(kubeconfig), "-n", ns, *args]
        stdin = yaml.safe_dump_all(step["stdin"]) if step.get("stdin") else None
        if step.get("background"):
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            background = (step["id"], proc)
            time.sleep(step.get("settle", 2))
            continue
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)
        answers[step["id"]] = {
            "exit": done.returncode,
            "stdout": normalize_kubectl(done.stdout, ns) if step.get("stdout", True) else "",
            "stderr": normalize_kubectl(done.stderr, ns).split("\n")[0] if done.returncode else "",
        }
        if step.get("end_background") and background:
            time.sleep(1.5)
            name, proc = background
            proc.terminate()
            out, _ = proc.communicate(timeout=10)
            answers[name] = {"exit": 0, "stdout": normalize_kubectl(out, ns), "stderr": ""}
            background = None
    return answers


def run_both(corpus: list[dict[str, Any]], kubectl_steps: list[dict[str, Any]]) -> dict:
    """Both servers with deploy/crds/ installed; the answers of each."""
    ns = "fidelity"
    real = RealApiServer.start()
    try:
        local = ApiServer.start()
        try:
            local_answers = replay(local, corpus, ns)
            real_answers = replay(real, corpus, ns)
            local_k = run_kubectl(local.kubeconfig, "fidelity-kubectl", kubectl_steps)
            real_k = run_kubectl(real.kubeconfig, "fidelity-kubectl", kubectl_steps)
        finally:
            local.stop()
    finally:
        real.stop()
    return {"requests": (local_answers, real_answers), "kubectl": (local_k, real_k)}


def differences(local: dict[str, Any], real: dict[str, Any]) -> list[str]:
    return [key for key in local if difference(local[key], real.get(key))]


def unexplained(results: dict, known: dict[str, str]) -> list[str]:
    """Differences that neither a fix removed nor known.yaml explains."""
    return [
        key
        for section in ("requests", "kubectl")
        for key in differences(*results[section])
        if key not in known
    ]


def load_known() -> dict[str, str]:
    """Differences that remain, each with why it does not matter to haptic."""
    path = CORPUS_DIR / "known.yaml"
    return yaml.safe_load(path.read_text()) or {} if path.exists() else {}


def _show(value: Any) -> str:
    return "`" + json.dumps(value, sort_keys=True).replace("`", "'") + "`"


def _request_text(step: dict[str, Any]) -> str:
    if "path" in step:
        return f"{step.get('method', 'GET')} {step['path']} {step.get('query') or ''}".strip()
    return "kubectl " + " ".join(step["args"])


def _fixed_section(by_id: dict[str, dict]) -> list[str]:
    """The differences found earlier and fixed (tests/fidelity/corpus/fixed.yaml)."""
    fixed = yaml.safe_load((CORPUS_DIR / "fixed.yaml").read_text()) or {}
    lines = [f"## fixed: {len(fixed)} differences found and removed", ""]
    for key, entry in fixed.items():
        lines += [
            f"### {key}",
            f"- request: `{_request_text(by_id[key])}`",
            f"- local (before): {entry['local']}",
            f"- real: {entry['real']}",
            f"- {entry['fix']}",
            "",
        ]
    return lines


def report(results: dict, corpus: list[dict], kubectl_steps: list[dict]) -> str:
    known = load_known()
    by_id = {s["id"]: s for s in corpus} | {s["id"]: s for s in kubectl_steps}
    lines = [
        "# Differential fidelity: localcluster/ against kube-apiserver",
        "",
        f"Generated by `make fidelity` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"Corpus: {len(corpus)} distinct API requests (tests/fidelity/corpus/requests.yaml) and "
        f"{len(kubectl_steps)} kubectl steps (tests/fidelity/corpus/kubectl.yaml); real server "
        f"Kubernetes {os.environ.get('KUBE_VERSION', 'as pinned in kube/go.mod')}.",
        "Normalization: tests/fidelity/README.md.",
        "",
    ]
    total = 0
    for section in ("requests", "kubectl"):
        local, real = results[section]
        diffs = differences(local, real)
        total += len(diffs)
        lines += [f"## {section}: {len(diffs)} differences of {len(local)}", ""]
        for key in diffs:
            step = by_id[key]
            what = _request_text(step)
            lines += [
                f"### {key}",
                f"- request: `{what}`",
                f"- local: {_show(local[key])}",
                f"- real: {_show(real.get(key))}",
                f"- {known.get(key, 'UNEXPLAINED')}",
                "",
            ]
    lines += _fixed_section(by_id)
    lines.insert(6, f"Differences: {total}; unexplained: {len(unexplained(results, known))}.")
    lines.insert(7, "")
    return "\n".join(lines) + "\n"
