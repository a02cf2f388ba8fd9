"""python manage.py checkpoints: the retained checkpoint pointers and the checkpoint objects."""

from __future__ import annotations

from typing import Any

from contract import CFG_PLURAL, CHECKPOINT_ROLE

from ._ops import ROLE_LABEL, KubeCommand, short, table


class Command(KubeCommand):
    help = (
        "Show the checkpoints Kubernetes holds now (ADR-0033): the pointers in "
        "status.retainedConfigs of the ordinary HAProxyCfg named like the template config "
        "(newest first), then every checkpoint HAProxyCfg (label "
        "haproxy-haptic.org/role=checkpoint) with its checksum, plan, worker receipt and "
        "whether a pointer retains it. The dashboard keeps the full history; this is the "
        "live view."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        self.setup(options)
        ordinary = self.custom_get(CFG_PLURAL, self.template)
        status = (ordinary or {}).get("status") or {}
        pointers = list(status.get("retainedConfigs") or [])
        objects = sorted(
            self.custom_list(CFG_PLURAL, f"{ROLE_LABEL}={CHECKPOINT_ROLE}"),
            key=lambda o: o["metadata"].get("creationTimestamp") or "",
            reverse=True,
        )
        retained = {p.get("uid") for p in pointers}
        rows = [_checkpoint_row(obj, retained) for obj in objects]
        if self.as_json:
            self.emit_json(
                {
                    "published": self.template if ordinary else None,
                    "publishedChecksum": ((ordinary or {}).get("spec") or {}).get("checksum"),
                    "retainedConfigs": pointers,
                    "checkpoints": rows,
                }
            )
            return
        self._write_published(ordinary, status)
        self._write_pointers(pointers)
        self._write_checkpoints(rows)

    def _write_published(self, ordinary: dict[str, Any] | None, status: dict[str, Any]) -> None:
        if ordinary is None:
            self.stdout.write(
                f"no published HAProxyCfg {self.namespace}/{self.template} yet "
                "(the leader publishes after the first deployment)"
            )
            return
        spec = ordinary.get("spec") or {}
        self.stdout.write(
            f"published HAProxyCfg {self.namespace}/{self.template}: checksum "
            f"{short(spec.get('checksum'))}, plan {short(spec.get('planID'))}, "
            f"published {status.get('publishedAt') or '-'}"
        )

    def _write_pointers(self, pointers: list[dict[str, Any]]) -> None:
        self.stdout.write("\nretained pointers (status.retainedConfigs, newest first):")
        if not pointers:
            self.stdout.write("  none")
            return
        self.stdout.write(
            table(
                ["#", "NAME", "UID", "CHECKSUM", "PLAN"],
                [
                    [
                        i,
                        p.get("name"),
                        p.get("uid"),
                        short(p.get("checksum")),
                        short(p.get("planID")),
                    ]
                    for i, p in enumerate(pointers)
                ],
            )
        )

    def _write_checkpoints(self, rows: list[dict[str, Any]]) -> None:
        self.stdout.write(f"\ncheckpoint objects ({len(rows)}):")
        if not rows:
            self.stdout.write("  none")
            return
        self.stdout.write(
            table(
                ["NAME", "CHECKSUM", "PLAN", "CREATED", "RECEIPT POD", "RETAINED"],
                [
                    [
                        r["name"],
                        short(r["checksum"]),
                        short(r["planID"]),
                        r["created"],
                        r["receiptPod"],
                        "yes" if r["retained"] else "no",
                    ]
                    for r in rows
                ],
            )
        )


def _checkpoint_row(obj: dict[str, Any], retained: set[Any]) -> dict[str, Any]:
    meta, spec = obj["metadata"], obj.get("spec") or {}
    receipt = (spec.get("retainedPlan") or {}).get("workerReceipt") or {}
    return {
        "name": meta["name"],
        "uid": meta.get("uid"),
        "checksum": spec.get("checksum"),
        "planID": spec.get("planID"),
        "created": meta.get("creationTimestamp"),
        "receiptPod": receipt.get("podName"),
        "acknowledgedAt": receipt.get("acknowledgedAt"),
        "retained": meta.get("uid") in retained,
    }
