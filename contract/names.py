"""Names on the wire: the API group and its kinds, annotations, labels and roles."""

from __future__ import annotations

from typing import NamedTuple

from contract.outcomes import PodAction

GROUP = "haproxy-haptic.org"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

TEMPLATE_KIND = "HAProxyTemplateConfig"
TEMPLATE_PLURAL = "haproxytemplateconfigs"
CFG_KIND = "HAProxyCfg"
# source.component and reportingComponent of the controller's Events; the site mirror
# selects render warnings in every namespace by it.
CONTROLLER_COMPONENT = "haptic-controller"
# The User-Agent of the site's database mirror (checkpoints/mirror.py), so an API server's
# log, and the fidelity check of recorded requests (tests/fidelity/coverage.py), can tell it
# from the tests' own kubernetes clients.
MIRROR_USER_AGENT = "haptic-mirror"
CFG_PLURAL = "haproxycfgs"


class ChildKind(NamedTuple):
    """An auxiliary file's custom resource: kind, plural, its list in spec.auxiliaryFiles and
    the short name used in content addresses."""

    kind: str
    plural: str
    ref_list: str
    short: str


# File kind (as in a rendered plan) -> the child resource that carries it.
CHILD_KINDS: dict[str, ChildKind] = {
    "map": ChildKind("HAProxyMapFile", "haproxymapfiles", "mapFiles", "map"),
    "general": ChildKind("HAProxyGeneralFile", "haproxygeneralfiles", "generalFiles", "gen"),
    "crt-list": ChildKind("HAProxyCRTListFile", "haproxycrtlistfiles", "crtListFiles", "crtl"),
}

# How a pod took a plan: the agent's apply result, its state's `worker_operation_mode` and
# the receipt's `mode` (status.deployedToPods). "runtime": commands on the runtime API, no
# reload; "file-only": the changed files written, nothing the worker had to be told (its
# runtime state already matched, read back); "reload": a worker started from the plan.
# The three are PodAction members: one set of names for what an apply did.
RUNTIME = PodAction.RUNTIME
FILE_ONLY = PodAction.FILE_ONLY
RELOAD = PodAction.RELOAD
APPLY_MODES = (RUNTIME, FILE_ONLY, RELOAD)

# The key of a certificate in its content-addressed Secret.
CERT_KEY = "tls.pem"

# Leases: the fencing epoch (leader Lease), the term's claim and the deployment intent
# (retained-state Lease).
EPOCH_ANNOTATION = f"{GROUP}/epoch"
CLAIM_ANNOTATION = f"{GROUP}/claim"
INTENT_ANNOTATION = f"{GROUP}/deployment-intent"
# On the retained-state Lease: the digest of the earlier release's copy a claim adopted, so
# a copy whose removal failed is removed by a later claim but never adopted again.
ADOPTED_COPY_ANNOTATION = f"{GROUP}/adopted-legacy-copy"
# On a Standby's retained-state Lease: the Active's last intent, carried by the hub's mirror.
MIRRORED_INTENT_ANNOTATION = f"{GROUP}/mirrored-intent"

# Outputs: what an object is for, and which template it belongs to.
ROLE_LABEL = f"{GROUP}/role"
TEMPLATE_UID_LABEL = f"{GROUP}/template-uid"
CHECKPOINT_ROLE = "checkpoint"
SHARED_ROLE = "shared-child"
PUBLISHED_ROLE = "published"

# The hub's mirror of the Active's objects on a Standby.
MIRROR_LABEL = f"{GROUP}/mirrored-from"
MIRRORED_RV_ANNOTATION = f"{GROUP}/mirrored-resource-version"
MIRRORED_UID_ANNOTATION = f"{GROUP}/mirrored-uid"
# The local uids a copy was re-parented to: a change (a child recreated here) rewrites it.
MIRRORED_LOCAL_REFS_ANNOTATION = f"{GROUP}/mirrored-local-refs"

# The readiness gate an HAProxy pod carries until it serves the promised configuration.
GATE_CONDITION = f"{GROUP}/load-balancer-ready"

# spec.controller of the IngressClasses whose Ingresses haptic serves.
INGRESS_CONTROLLER = f"{GROUP}/controller"
