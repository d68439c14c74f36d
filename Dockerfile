# One image for every role: web, worker, beat, the migrate one-off, (later) the GPU-node agent and the simulator.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
RUN pip install --upgrade pip && pip install -e .
COPY . .
# Collect under production settings: they serve through the manifest storage, which needs the manifest written
# here. The throw-away key only lets the settings load; the running container gets its own from the environment.
RUN KVDASH_ENV=production SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(64))')" python manage.py collectstatic --noinput
RUN useradd --create-home kvdash && mkdir -p /app/var && chown -R kvdash /app/var
USER kvdash
EXPOSE 8000
CMD ["gunicorn", "kvdash.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
