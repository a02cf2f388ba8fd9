"""What to list and watch: a resource collection, optionally narrowed by namespace/selectors."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from contract import API_VERSION, TEMPLATE_PLURAL


@dataclass(frozen=True)
class ResourceRef:
    """A collection on the API server. `kind` is the cache's own name for it (the key in
    snapshots and change notifications), e.g. "ingresses" or "haproxy-pods"."""

    kind: str
    api_version: str  # "v1" or "group/version"
    plural: str
    namespace: str | None = None  # None: all namespaces
    label_selector: str = ""
    field_selector: str = ""

    def collection_path(self) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespace:
            return f"{base}/namespaces/{quote(self.namespace, safe='')}/{self.plural}"
        return f"{base}/{self.plural}"

    def query(self) -> list[tuple[str, str]]:
        q: list[tuple[str, str]] = []
        if self.label_selector:
            q.append(("labelSelector", self.label_selector))
        if self.field_selector:
            q.append(("fieldSelector", self.field_selector))
        return q


# The controller's fixed watches (all namespaces unless the caches are told otherwise).
INGRESSES = ResourceRef("ingresses", "networking.k8s.io/v1", "ingresses")
SERVICES = ResourceRef("services", "v1", "services")
ENDPOINTSLICES = ResourceRef("endpointslices", "discovery.k8s.io/v1", "endpointslices")
# Only TLS and Opaque secrets (the server filters, so service-account tokens, registry
# credentials and the like never reach this process): TLS for certificates, Opaque for the
# basic-auth users and CA bundles that annotations name.
SECRETS = ResourceRef("secrets", "v1", "secrets", field_selector="type=kubernetes.io/tls")
OPAQUE_SECRETS = ResourceRef("opaque-secrets", "v1", "secrets", field_selector="type=Opaque")
# Cluster-scoped: which classes are ours decides which Ingresses are (controller.render.ingress).
INGRESSCLASSES = ResourceRef("ingressclasses", "networking.k8s.io/v1", "ingressclasses")


def template_config_ref(namespace: str, name: str) -> ResourceRef:
    """The one HAProxyTemplateConfig, watched by name so other configs cost nothing."""
    return ResourceRef(
        "templateconfig",
        API_VERSION,
        TEMPLATE_PLURAL,
        namespace=namespace,
        field_selector=f"metadata.name={name}",
    )
