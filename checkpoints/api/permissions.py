"""API permissions: every view needs a viewer; writes need an operator."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from checkpoints.roles import is_operator, is_viewer


class IsViewer(BasePermission):
    message = "You need the viewer or operator role."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_viewer(request.user)


class ViewerReadsOperatorWrites(BasePermission):
    message = "Reading needs the viewer role; requesting, approving and rejecting need operator."

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return is_viewer(request.user)
        return is_operator(request.user)
