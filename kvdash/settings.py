"""kvdash settings: read from the environment in this one place; the defaults are the embedded set-up
(SQLite file and a broker that needs no server, both under var/)."""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kvdash.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("KVDASH_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

KVDASH_ENV = env_str("KVDASH_ENV", "dev")
if KVDASH_ENV not in {"dev", "test", "production"}:
    raise ImproperlyConfigured(f"KVDASH_ENV must be dev, test or production, got {KVDASH_ENV!r}")
PRODUCTION = KVDASH_ENV == "production"

_DEV_SECRET_KEY = "dev-only-insecure-key-never-use-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", "" if PRODUCTION else _DEV_SECRET_KEY)
if PRODUCTION and (len(SECRET_KEY) < 50 or SECRET_KEY == _DEV_SECRET_KEY or SECRET_KEY.startswith("django-insecure")):
    raise ImproperlyConfigured("KVDASH_ENV=production needs SECRET_KEY set to a random value of 50+ characters")

DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "kvdash",
    "planner",
    "monitor",
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

ROOT_URLCONF = "kvdash.urls"
WSGI_APPLICATION = "kvdash.wsgi.application"
ASGI_APPLICATION = "kvdash.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'kvdash.sqlite3'}")
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server, the worker and the simulated fleet share one file: wait for the lock, not fail.
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "planner:scenario-list"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the finders when collectstatic has not run (make run, tests, benchmarks).
WHITENOISE_USE_FINDERS = True
# plotly.js comes from the installed plotly package, never a CDN: the dashboard must work air-gapped.
import plotly as _plotly  # noqa: E402

STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/plotly", Path(_plotly.__file__).parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Celery: Redis when CELERY_BROKER_URL is set, else kombu's filesystem transport under var/ (no server).
CELERY_QUEUE_DIR = VAR_DIR / "celery" / "queue"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
_EMBEDDED_BROKER = CELERY_BROKER_URL.startswith("filesystem")
_RESULTS_DIR = VAR_DIR / "celery" / "results"
CELERY_RESULT_BACKEND = env_str(
    "CELERY_RESULT_BACKEND", f"file://{_RESULTS_DIR}" if _EMBEDDED_BROKER else CELERY_BROKER_URL
)
if _EMBEDDED_BROKER:
    _RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_QUEUE_DIR.mkdir(parents=True, exist_ok=True)
    (VAR_DIR / "celery" / "processed").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_QUEUE_DIR),
        "data_folder_out": str(CELERY_QUEUE_DIR),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }
else:
    # An unacknowledged task (its worker killed) is delivered again after this long; workers look for such
    # tasks every tenth of it (kombu's default sweep is every 100 s).
    _VISIBILITY_TIMEOUT = env_int("CELERY_VISIBILITY_TIMEOUT", 600)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": _VISIBILITY_TIMEOUT,
        "unacked_restore_interval": max(1, min(10, _VISIBILITY_TIMEOUT // 10)),
        "unacked_restore_throttle": 1,
    }
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# Monitor: agents scrape every interval, with a timeout below it (Prometheus' rule); ingest runs centrally.
KVDASH_SCRAPE_INTERVAL = env_int("KVDASH_SCRAPE_INTERVAL", 10)
if not 1 <= KVDASH_SCRAPE_INTERVAL <= 3600:
    raise ImproperlyConfigured(f"KVDASH_SCRAPE_INTERVAL must be 1..3600 seconds, got {KVDASH_SCRAPE_INTERVAL}")
KVDASH_SCRAPE_TIMEOUT = min(float(KVDASH_SCRAPE_INTERVAL) * 0.8, 10.0)
KVDASH_INGEST_QUEUE = "kvdash.ingest"
# Ingest retries while the database is away: backoff doubling from 2 s up to this, 30 tries (~25 min at 60).
KVDASH_INGEST_RETRY_MAX_S = env_int("KVDASH_INGEST_RETRY_MAX_S", 60)
KVDASH_RAW_RETENTION_DAYS = env_int("KVDASH_RAW_RETENTION_DAYS", 30)
# Per-GPU rows outnumber engine rows 4:1 at 10,000 GPUs, and latency buckets are wide: shorter raw retention,
# the rollups keep the long view (docs/monitor.md).
KVDASH_GPU_RETENTION_DAYS = env_int("KVDASH_GPU_RETENTION_DAYS", 8)
KVDASH_HISTOGRAM_RETENTION_DAYS = env_int("KVDASH_HISTOGRAM_RETENTION_DAYS", 8)
KVDASH_ROLLUP_1M_RETENTION_DAYS = env_int("KVDASH_ROLLUP_1M_RETENTION_DAYS", 30)
KVDASH_ROLLUP_1H_RETENTION_DAYS = env_int("KVDASH_ROLLUP_1H_RETENTION_DAYS", 400)
# Alerts: a Slack-compatible incoming webhook (empty: no notifications); a rule's own URL overrides it.
KVDASH_ALERT_WEBHOOK_URL = env_str("KVDASH_ALERT_WEBHOOK_URL", "").strip()
if KVDASH_ALERT_WEBHOOK_URL and not KVDASH_ALERT_WEBHOOK_URL.startswith(("http://", "https://")):
    # Not echoed: a webhook URL is a secret (Slack's carry their token in the path).
    raise ImproperlyConfigured("KVDASH_ALERT_WEBHOOK_URL must be an http(s) URL")
KVDASH_ALERT_WEBHOOK_TIMEOUT = 10.0
CELERY_TASK_ROUTES = {"monitor.ingest_batch": {"queue": KVDASH_INGEST_QUEUE}}
CELERY_BEAT_SCHEDULE: dict[str, dict] = {
    "monitor-schedule-scrapes": {"task": "monitor.schedule_scrapes", "schedule": float(KVDASH_SCRAPE_INTERVAL)},
    "monitor-rollup": {"task": "monitor.rollup", "schedule": 60.0},
    # Samples that arrive late (ingest retried through a database outage) are rolled up by this sweep.
    "monitor-rollup-catch-up": {"task": "monitor.rollup_catch_up", "schedule": 900.0},
    "monitor-prune": {"task": "monitor.prune", "schedule": 3600.0},
    "monitor-pull-prometheus": {
        "task": "monitor.pull_prometheus",
        "schedule": float(KVDASH_SCRAPE_INTERVAL),
        "options": {"expires": float(KVDASH_SCRAPE_INTERVAL)},
    },
    # Expires after one interval: a worker that was away does not wake up to a backlog of evaluations.
    "monitor-evaluate-alerts": {
        "task": "monitor.evaluate_alerts",
        "schedule": float(KVDASH_SCRAPE_INTERVAL),
        "options": {"expires": float(KVDASH_SCRAPE_INTERVAL)},
    },
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON parser turns a deeply nested body into a 500; ours answers 400.
    "DEFAULT_PARSER_CLASSES": [
        "planner.api.parsers.JSONBodyParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_RATES": {"anon_sizing": env_str("KVDASH_ANON_SIZING_RATE", "600/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "kvdash API",
    "DESCRIPTION": "Size vLLM KV-cache deployments, manage planner scenarios and read the catalog.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# Anonymous reads of the monitor's pages and API: on in dev (make run), off in production unless asked for.
KVDASH_PUBLIC_MONITOR = env_bool("KVDASH_PUBLIC_MONITOR", not PRODUCTION)

# kvdash's own /metrics (plans and alert states for Prometheus): with a token, scrapers send it as a bearer
# token; without one, /metrics follows the monitor's read rule (KVDASH_PUBLIC_MONITOR or a signed-in user).
KVDASH_METRICS_TOKEN = env_str("KVDASH_METRICS_TOKEN", "").strip()

# Anonymous reads of the catalog and stateless sizing: on in dev, off in production unless asked for.
KVDASH_PUBLIC_SIZING = env_bool("KVDASH_PUBLIC_SIZING", not PRODUCTION)

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_CONTENT_TYPE_NOSNIFF = True
