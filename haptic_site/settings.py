"""Django settings for haptic, all read from the environment.

DATABASE_URL   default: SQLite file under var/ (the zero-setup default of `make run`)
REDIS_URL      Celery broker and result backend; default: kombu's filesystem transport under
               var/broker, an embedded broker that needs no server (see README)
HAPTIC_KUBECONFIG  kubeconfig of the cluster to control; unset: in-cluster config, else the
               local cluster's kubeconfig under var/
HAPTIC_HUB_KUBECONFIGS  comma-separated kubeconfigs, one per hub cluster, that the Hub page
               reads to show which hub is Active; unset: the page says how to set it
HAPTIC_HUB_IDENTITIES   optional comma-separated hub identities, in the same order (one per
               kubeconfig, else ignored); unset: an endpoint is trusted when it names its own URL
HAPTIC_TEMPLATE_CONFIG  name of the HAProxyTemplateConfig; default: haptic
SECRET_KEY     default: generated once into var/secret_key
DEBUG          default: off
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from config import env
from config.env import env_bool, env_int, env_list, env_text, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env.var_dir(BASE_DIR / "var")

SECRET_KEY = secret_key(VAR_DIR)
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "checkpoints",
    "dashboard",
    "controller",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "haptic_site.urls"

TEMPLATES = [
    {
        # Django's own templates live in each app; the top-level templates/ holds HAProxy
        # Jinja2 template libraries, which Django never renders.
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "haptic_site" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context_processors.roles",
            ],
        },
    },
]

WSGI_APPLICATION = "haptic_site.wsgi.application"
ASGI_APPLICATION = "haptic_site.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env_text("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'haptic.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}

# `make run`'s SQLite file is shared by the web site, the mirror's threads and the workers.
# WAL lets readers go on while one writes; IMMEDIATE takes the write lock when a transaction
# begins, so a writer waits (up to the timeout) instead of failing with "database is locked"
# when two read-then-write transactions meet (SQLite cannot wait for a lock upgrade).
SQLITE_BUSY_TIMEOUT_SECONDS = 30
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": SQLITE_BUSY_TIMEOUT_SECONDS,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Production hardening; `manage.py check --deploy` explains what remains (see README).
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("HAPTIC_SECURE_COOKIES", not DEBUG and env_bool("HAPTIC_TLS"))
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = env_bool("HAPTIC_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("HAPTIC_HSTS_SECONDS", 0)
# Subdomains and preload are the operator's decision about the whole domain (see README).
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HAPTIC_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("HAPTIC_HSTS_PRELOAD", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("HAPTIC_TLS") else None
X_FRAME_OPTIONS = "DENY"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "checkpoints.api.contract.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "haptic API",
    "DESCRIPTION": "Checkpoints, deployment intents, pod receipts, leadership terms, events "
    "and manual recovery reviews of the haptic HAProxy control plane.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request bodies get their own components, so "required, not blank" shows as minLength.
    "COMPONENT_SPLIT_REQUEST": True,
    # Every error answer and query constraint the views enforce (checkpoints/api/contract.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "checkpoints.api.contract.document_errors",
    ],
}

# Celery: Redis when REDIS_URL is given (tests, production); otherwise kombu's filesystem
# transport, which needs no server and works between processes on one machine.
REDIS_URL = env.redis_url()
BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
else:
    for sub in ("out", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    (VAR_DIR / "celery-results").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = f"file://{VAR_DIR / 'celery-results'}"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"

# Kubernetes: which cluster the controller and the mirror talk to.
HAPTIC_KUBECONFIG = env.kubeconfig()
# The hub clusters the dashboard asks "which hub is Active?" (controller.hub.resolver).
HAPTIC_HUB_KUBECONFIGS = env_list("HAPTIC_HUB_KUBECONFIGS", [])
# Identities pair with kubeconfigs by position, so a list of another length cannot be used.
_hub_identities = env_list("HAPTIC_HUB_IDENTITIES", [])
HAPTIC_HUB_IDENTITIES = (
    _hub_identities
    if _hub_identities and len(_hub_identities) == len(HAPTIC_HUB_KUBECONFIGS)
    else None
)
HAPTIC_NAMESPACE = env.namespace()
HAPTIC_TEMPLATE_CONFIG = env.template_config()
HAPTIC_HAPROXY_BIN = env.haproxy_bin()

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_text("LOG_LEVEL", "INFO")},
    # One line per HTTP request to agents and API servers is noise, not information.
    "loggers": {"httpx": {"level": "WARNING"}, "urllib3": {"level": "WARNING"}},
}
