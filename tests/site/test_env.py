"""config/env.py: how every setting of haptic is read, and that nothing else reads one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from config import env

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("controller", "agents", "checkpoints", "config", "devstack", "haptic_site",
           "localcluster", "contract", "dashboard", "soak")  # fmt: skip
SETTINGS_MODULES = {"config/env.py"}
# Django's standard entry points (asgi, wsgi, celery) name the settings module this way.
DJANGO_ENTRY = 'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "haptic_site.settings")'


def test_empty_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAPTIC_NAMESPACE", "")
    monkeypatch.setenv("HAPTIC_TEMPLATE_CONFIG", "")
    monkeypatch.setenv("HAPTIC_WEB_PORT", "")
    assert env.namespace() == "haptic"
    assert env.template_config() == "haptic"
    assert env.env_int("HAPTIC_WEB_PORT", 8000) == 8000
    monkeypatch.setenv("HAPTIC_NAMESPACE", "ops")
    assert env.namespace() == "ops"


def test_a_bad_number_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAPTIC_WEB_PORT", "eighty")
    with pytest.raises(ValueError, match="HAPTIC_WEB_PORT='eighty' is not an integer"):
        env.env_int("HAPTIC_WEB_PORT", 8000)
    monkeypatch.setenv("HAPTIC_CONVERGE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="HAPTIC_CONVERGE_TIMEOUT"):
        env.env_float("HAPTIC_CONVERGE_TIMEOUT", 300.0)


def test_child_environ_adds_without_exporting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAPTIC_KUBECONFIG", "/k")
    monkeypatch.delenv("POD_IP", raising=False)
    child = env.child_environ({"POD_IP": "127.0.0.9"})
    assert child["HAPTIC_KUBECONFIG"] == "/k" and child["POD_IP"] == "127.0.0.9"
    assert env.env_text("POD_IP") == ""


def _environ_uses(path: Path) -> list[int]:
    text = path.read_text()
    lines = text.splitlines()
    return [
        node.lineno
        for node in ast.walk(ast.parse(text, str(path)))
        if (isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"})
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
        and lines[node.lineno - 1].strip() != DJANGO_ENTRY
    ]


def test_only_the_settings_modules_read_the_environment() -> None:
    found = []
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel not in SETTINGS_MODULES:
                found += [f"{rel}:{line}" for line in _environ_uses(path)]
    assert found == []


def _readme_settings_tables() -> list[str]:
    readme = (REPO / "README.md").read_text()
    tables, start = [], readme.find("| setting | default | meaning |")
    while start != -1:
        tables.append(readme[start : readme.index("\n\n", start)] + "\n")
        start = readme.find("| setting | default | meaning |", start + 1)
    return tables


def test_the_readme_settings_tables_are_the_generated_ones() -> None:
    # Regenerate with `python -m config.env --markdown [--development]` after changing
    # env.SETTINGS or env.DEVELOPMENT_SETTINGS.
    assert _readme_settings_tables() == [
        env.settings_markdown(env.SETTINGS),
        env.settings_markdown(env.DEVELOPMENT_SETTINGS),
    ]


LISTED = {name for setting in env.SETTINGS + env.DEVELOPMENT_SETTINGS for name in setting.names}
READERS = {"env_text", "env_int", "env_float", "env_bool", "env_list", "pod_env"}


@pytest.fixture(scope="module")
def string_first_arguments() -> set[tuple[str, str]]:
    """(called name, first argument) of every call in product code whose first argument is a
    string literal; the product code is parsed once for both tests below."""
    found = set()
    for top in PRODUCT:
        for path in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and node.args:
                    first = node.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        called = getattr(node.func, "attr", getattr(node.func, "id", ""))
                        found.add((called, first.value))
    return found


def test_every_listed_setting_is_read_by_product_code(string_first_arguments: set) -> None:
    read = {value for _, value in string_first_arguments}
    assert LISTED - read == set()


def test_every_setting_product_code_reads_is_in_a_table(string_first_arguments: set) -> None:
    read = {value for called, value in string_first_arguments if called in READERS}
    assert read - LISTED == set()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["config.env", "--help"], list(env.SETTINGS + env.DEVELOPMENT_SETTINGS)),
        (
            ["agents", "serve", "--help"],
            [s for s in env.SETTINGS if {"HAPTIC_HAPROXY_BIN", "POD_IP"} & set(s.names)],
        ),
        # A controller replica and the web site read the production table.
        (["celery", "-A", "haptic_site", "worker", "--help"], list(env.SETTINGS)),
        (["manage", "--help"], list(env.SETTINGS)),
    ],
)
def test_help_lists_the_settings_from_the_same_definition(argv: list[str], expected: list) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert len(expected) >= 2
    for setting in expected:
        assert ", ".join(setting.names) in shown, setting.names
        assert setting.meaning.replace("`", "")[:40] in " ".join(shown.split()), setting.names
