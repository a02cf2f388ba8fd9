"""Pure mapping from Kubernetes objects to rows, and the diff functions (no database)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from checkpoints import mapping
from checkpoints.diff import NO_FINAL_NEWLINE, FileVersion, file_diffs, side_by_side, split_visible
from tests.site import factories as f


def test_checkpoint_row_reads_spec_owner_and_worker_receipt() -> None:
    m = f.map_file("maps/hosts.map", "a b\n")
    obj = f.checkpoint("global\n", [m], plan_id="plan-1", rv="42")
    row = mapping.checkpoint_row(obj)
    assert row["uid"] == obj["metadata"]["uid"]
    assert row["resource_version"] == "42"
    assert row["template_name"] == "haptic"
    assert row["template_uid"] == f.TEMPLATE_UID
    assert row["plan_id"] == "plan-1"
    assert row["checksum"] == obj["spec"]["checksum"]
    assert row["receipt_pod_name"] == "haproxy-0"
    assert row["receipt_applied_plan_id"] == "plan-1"
    assert row["receipt_acknowledged_at"] == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    assert row["retained_plan_encoding"] == "gzip+base64"


def test_checkpoint_files_decode_compressed_config_and_never_hold_certificate_bytes() -> None:
    m = f.map_file("maps/hosts.map", "a b\n")
    cert = {"secretName": "tls", "path": "certs/a.pem", "checksum": "sha256:c"}
    obj = f.checkpoint("global\n  daemon\n", [m], compressed=True, certificates=[cert])
    files = {x["path"]: x for x in mapping.checkpoint_files(obj)}
    assert files["haproxy.cfg"]["content"] == "global\n  daemon\n"
    assert files["haproxy.cfg"]["kind"] == "config"
    assert files["maps/hosts.map"]["kind"] == "map"
    assert files["maps/hosts.map"]["content"] is None  # comes from the mirrored child
    assert files["maps/hosts.map"]["object_name"] == m["metadata"]["name"]
    assert files["certs/a.pem"] == {
        "kind": "certificate",
        "path": "certs/a.pem",
        "checksum": "sha256:c",
        "object_name": "tls",
        "object_uid": "",
        "content": None,
    }


def test_damaged_compressed_content_is_kept_as_stored() -> None:
    assert mapping.decode_content("not base64 !!", True) == "not base64 !!"


def test_role_defaults_to_published() -> None:
    obj = f.checkpoint("x")
    assert mapping.haproxycfg_role(obj) == "checkpoint"
    del obj["metadata"]["labels"]
    assert mapping.haproxycfg_role(obj) == "published"


def test_receipt_rows_fingerprint_changes_with_any_field() -> None:
    cfg = f.published([f.receipt("p0", "plan", "sum", "2026-11-30T08:00:00Z")])
    (a,) = mapping.receipt_rows(cfg)
    cfg["status"]["deployedToPods"][0]["consecutiveErrors"] = 1
    (b,) = mapping.receipt_rows(cfg)
    assert a["fingerprint"] != b["fingerprint"]
    assert a["pod_name"] == "p0" and a["source_uid"] == "published-uid"
    assert (
        mapping.receipt_rows(f.published([f.receipt("p0", "plan", "sum", "2026-11-30T08:00:00Z")]))[
            0
        ]["fingerprint"]
        == a["fingerprint"]
    )


def test_a_receipts_term_is_mapped_and_an_old_receipt_keeps_its_fingerprint() -> None:
    """Rows of receipts with a term carry it; a receipt without one (published before
    receipts carried it) maps to the row, and the fingerprint, it always had, so relisting
    an old status after the upgrade adds no duplicate row."""
    old = f.receipt("p0", "plan", "sum", "2026-11-30T08:00:00Z")
    (row,) = mapping.receipt_rows(f.published([old]))
    assert "term_holder" not in row and "term_epoch" not in row
    before = {k: v for k, v in row.items() if k != "fingerprint"}
    assert row["fingerprint"] == mapping.fingerprint(before)
    new = f.receipt("p0", "plan", "sum", "2026-11-30T08:00:00Z", term=("controller-1", 7))
    (with_term,) = mapping.receipt_rows(f.published([new]))
    assert (with_term["term_holder"], with_term["term_epoch"]) == ("controller-1", 7)
    assert with_term["fingerprint"] != row["fingerprint"]
    cp = f.checkpoint("global\n")
    cp["spec"]["retainedPlan"]["workerReceipt"]["term"] = {"holder": "controller-1", "epoch": 7}
    checkpoint = mapping.checkpoint_row(cp)
    assert (checkpoint["receipt_term_holder"], checkpoint["receipt_term_epoch"]) == (
        "controller-1",
        7,
    )
    assert mapping.checkpoint_row(f.checkpoint("global\n"))["receipt_term_epoch"] is None


def test_intent_and_claim_from_the_retained_state_lease() -> None:
    lease = f.retained_lease("plan-9", "sha256:9", 7, holder="c-1")
    assert mapping.is_retained_state_lease(lease)
    row = mapping.intent_row(lease, "retained-state")
    assert row is not None
    assert (row["plan_id"], row["checksum"], row["holder"], row["epoch"]) == (
        "plan-9",
        "sha256:9",
        "c-1",
        7,
    )
    assert row["template_uid"] == f.TEMPLATE_UID
    assert row["claim"]["holder"] == "c-1"
    # The claim and resourceVersion are not part of the intent's identity.
    lease["metadata"]["resourceVersion"] = "99"
    lease["metadata"]["annotations"][mapping.CLAIM_ANNOTATION] = json.dumps(
        {"holder": "c-2", "epoch": 8}
    )
    assert mapping.intent_row(lease, "retained-state")["fingerprint"] == row["fingerprint"]


def test_unreadable_or_missing_intent_is_none() -> None:
    lease = f.retained_lease("p", "c", 1)
    lease["metadata"]["annotations"][mapping.INTENT_ANNOTATION] = "{not json"
    assert mapping.intent_row(lease, "retained-state") is None
    del lease["metadata"]["annotations"][mapping.INTENT_ANNOTATION]
    assert mapping.intent_row(lease, "retained-state") is None


def test_term_from_the_leader_lease_epoch_annotation() -> None:
    lease = f.leader_lease("c-1", 4, "2026-11-30T08:00:00Z", "2026-11-30T08:00:30Z")
    assert not mapping.is_retained_state_lease(lease)
    term = mapping.term_row(lease)
    assert term["holder"] == "c-1" and term["epoch"] == 4
    assert term["last_renew_at"] == datetime(2026, 11, 30, 8, 0, 30, tzinfo=UTC)
    lease["spec"]["holderIdentity"] = ""
    assert mapping.term_row(lease) is None


def test_event_row() -> None:
    row = mapping.event_row(f.event("RetainedConfigUnavailable", "no checkpoint", count=3))
    assert row["reason"] == "RetainedConfigUnavailable"
    assert row["involved_kind"] == "HAProxyTemplateConfig"
    assert row["count"] == 3
    assert row["last_timestamp"] == datetime(2026, 11, 30, 8, 3, tzinfo=UTC)


def test_hub_row_modes() -> None:
    cfg = {"metadata": {"name": "haptic", "namespace": "haptic", "uid": "t"}, "status": {}}
    assert mapping.hub_row(cfg)["mode"] == "standalone"
    cfg["status"]["activeController"] = {"activeIdentity": "hub-a", "endpoint": "https://a"}
    assert mapping.hub_row(cfg)["mode"] == "ha"
    cfg["metadata"]["annotations"] = {mapping.HUB_MODE_ANNOTATION: "standby"}
    assert mapping.hub_row(cfg)["mode"] == "standby"
    assert mapping.hub_row(cfg)["active_identity"] == "hub-a"


def test_resource_version_order() -> None:
    assert mapping.rv_newer("10", "9")
    assert not mapping.rv_newer("9", "10")
    assert not mapping.rv_newer("9", "9")
    assert mapping.rv_newer("abc", "abd")
    assert mapping.rv_newer("1", "")


def test_file_diffs_cover_changed_added_removed_and_certificates() -> None:
    a = [
        FileVersion("haproxy.cfg", "config", "s1", "global\n  maxconn 10\n"),
        FileVersion("maps/a.map", "map", "m1", "x 1\n"),
        FileVersion("certs/a.pem", "certificate", "c1", None),
    ]
    b = [
        FileVersion("haproxy.cfg", "config", "s2", "global\n  maxconn 20\n"),
        FileVersion("maps/b.map", "map", "m2", "y 2\n"),
        FileVersion("certs/a.pem", "certificate", "c2", None),
    ]
    out = {d["path"]: d for d in file_diffs(a, b, "A", "B")}
    assert out["haproxy.cfg"]["status"] == "changed"
    assert "-  maxconn 10" in out["haproxy.cfg"]["diff"]
    assert "+  maxconn 20" in out["haproxy.cfg"]["diff"]
    assert "--- A/haproxy.cfg" in out["haproxy.cfg"]["diff"]
    assert out["maps/a.map"]["status"] == "removed" and "-x 1" in out["maps/a.map"]["diff"]
    assert out["maps/b.map"]["status"] == "added" and "+y 2" in out["maps/b.map"]["diff"]
    assert out["certs/a.pem"]["status"] == "changed"
    assert out["certs/a.pem"]["diff"] == "" and not out["certs/a.pem"]["content_available"]
    assert file_diffs(a, a)[0]["status"] == "unchanged"
    assert file_diffs(a, b)[0]["kind"] == "config"


def test_side_by_side_rows_and_context_collapse() -> None:
    left = "\n".join(f"line {i}" for i in range(20))
    right = left.replace("line 10", "line ten")
    rows = side_by_side(left, right, context=2)
    changed = [r for r in rows if r["tag"] == "replace"]
    assert changed == [
        {
            "tag": "replace",
            "left_no": 11,
            "left": "line 10",
            "left_ws": "",
            "left_eol": "",
            "right_no": 11,
            "right": "line ten",
            "right_ws": "",
            "right_eol": "",
        }
    ]
    skips = [r for r in rows if r["tag"] == "skip"]
    assert sum(s["count"] for s in skips) + len([r for r in rows if r["tag"] == "equal"]) == 19
    inserted = side_by_side("a\n", "a\nb\n")
    assert inserted[-1] == {
        "tag": "insert",
        "left_no": None,
        "left": "",
        "left_ws": "",
        "left_eol": "",
        "right_no": 2,
        "right": "b",
        "right_ws": "",
        "right_eol": "",
    }


def test_a_change_in_whitespace_line_endings_or_final_newline_shows_as_changed_rows() -> None:
    """The diff once showed "64 unchanged lines" for a changed haproxy.cfg."""
    body = "".join(f"line {i}\n" for i in range(64))
    cases = {
        "final newline": (body, body.rstrip("\n"), ("", ""), ("", NO_FINAL_NEWLINE)),
        "trailing blanks": (
            body,
            body.replace("line 5\n", "line 5 \t\n"),
            ("", "\u00b7\u2192"),
            ("", ""),
        ),
        "carriage return": (body, body.replace("line 7\n", "line 7\r\n"), ("", "\u240d"), ("", "")),
    }
    for name, (a, b, ws, eol) in cases.items():
        rows = side_by_side(a, b, context=3)
        changed = [r for r in rows if r["tag"] not in ("equal", "skip")]
        assert len(changed) == 1, name
        row = changed[0]
        assert row["left"] == row["right"], name  # the text alone looks the same...
        assert (row["left_ws"], row["right_ws"]) == ws, name  # ...what differs is drawn
        assert (row["left_eol"], row["right_eol"]) == eol, name
    unified = file_diffs(
        [FileVersion("haproxy.cfg", "config", "s1", "a\nb\n")],
        [FileVersion("haproxy.cfg", "config", "s2", "a\nb")],
    )[0]["diff"]
    assert unified.endswith("-b\n+b\n\\ No newline at end of file\n")


def test_split_visible_draws_only_trailing_whitespace() -> None:
    assert split_visible("  server a\n") == ("  server a", "", "")
    assert split_visible("x \r\n") == ("x", "\u00b7\u240d", "")
    assert split_visible("x\t") == ("x", "\u2192", NO_FINAL_NEWLINE)


def test_factories_checksum_matches_the_contract() -> None:
    # sha256 over path NUL content NUL, sorted by path (docs/contracts.md).
    expected = "sha256:" + hashlib.sha256(b"a\x001\x00b\x002\x00").hexdigest()
    assert f.checksum_of({"b": "2", "a": "1"}) == expected


def test_the_config_is_unchanged_when_only_an_auxiliary_file_changed() -> None:
    """The config's stored checksum is the whole checkpoint's, so it differs whenever any
    file does: with both contents stored, the contents decide."""
    config = "global\n" + "".join(f"  # line {i}\n" for i in range(64))
    a = [
        FileVersion("haproxy.cfg", "config", "sha256:whole-a", config),
        FileVersion("maps/a.map", "map", "m1", "x 1\n"),
    ]
    b = [
        FileVersion("haproxy.cfg", "config", "sha256:whole-b", config),
        FileVersion("maps/a.map", "map", "m2", "x 2\n"),
    ]
    out = {d["path"]: d for d in file_diffs(a, b)}
    assert out["haproxy.cfg"]["status"] == "unchanged" and out["haproxy.cfg"]["diff"] == ""
    assert out["maps/a.map"]["status"] == "changed"
