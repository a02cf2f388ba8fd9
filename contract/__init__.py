"""The API contract every part of haptic agrees on, in one place.

Group, version and kinds of the custom resources, the annotation and label names written on
Kubernetes objects, the codec of compressed file content, the content checksum and the
fencing-epoch annotation's parser. Standard library only, so the agent, the local cluster,
the Django apps and the controller can all import it (docs/contracts.md describes the shapes).
"""

from contract.codec import pack, unpack
from contract.digest import content_checksum, file_digest, sha256_hex, strip_digest_prefix
from contract.epoch import InvalidEpoch, format_epoch, parse_epoch
from contract.names import (
    ADOPTED_COPY_ANNOTATION,
    API_VERSION,
    CERT_KEY,
    CFG_KIND,
    CFG_PLURAL,
    CHECKPOINT_ROLE,
    CHILD_KINDS,
    CLAIM_ANNOTATION,
    EPOCH_ANNOTATION,
    GATE_CONDITION,
    GROUP,
    INGRESS_CONTROLLER,
    INTENT_ANNOTATION,
    MIRROR_LABEL,
    MIRRORED_INTENT_ANNOTATION,
    MIRRORED_LOCAL_REFS_ANNOTATION,
    MIRRORED_RV_ANNOTATION,
    MIRRORED_UID_ANNOTATION,
    PUBLISHED_ROLE,
    ROLE_LABEL,
    SHARED_ROLE,
    TEMPLATE_KIND,
    TEMPLATE_PLURAL,
    TEMPLATE_UID_LABEL,
    VERSION,
    ChildKind,
)
from contract.outcomes import PodAction

__all__ = [
    "ADOPTED_COPY_ANNOTATION",
    "API_VERSION",
    "CERT_KEY",
    "CFG_KIND",
    "CFG_PLURAL",
    "CHECKPOINT_ROLE",
    "CHILD_KINDS",
    "CLAIM_ANNOTATION",
    "EPOCH_ANNOTATION",
    "GATE_CONDITION",
    "GROUP",
    "INGRESS_CONTROLLER",
    "INTENT_ANNOTATION",
    "MIRRORED_INTENT_ANNOTATION",
    "MIRRORED_LOCAL_REFS_ANNOTATION",
    "MIRRORED_RV_ANNOTATION",
    "MIRRORED_UID_ANNOTATION",
    "MIRROR_LABEL",
    "PUBLISHED_ROLE",
    "ROLE_LABEL",
    "SHARED_ROLE",
    "TEMPLATE_KIND",
    "TEMPLATE_PLURAL",
    "TEMPLATE_UID_LABEL",
    "VERSION",
    "ChildKind",
    "InvalidEpoch",
    "PodAction",
    "content_checksum",
    "file_digest",
    "format_epoch",
    "pack",
    "parse_epoch",
    "sha256_hex",
    "strip_digest_prefix",
    "unpack",
]
