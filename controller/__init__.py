"""The controller: elector, watch caches, render, deploy, publish, recover (Celery workers)."""
