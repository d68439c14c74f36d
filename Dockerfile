# One image for every role: web, worker, beat, (later) the GPU-node agent and the simulator.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
RUN pip install --upgrade pip && pip install -e .
COPY . .
RUN KVDASH_ENV=dev python manage.py collectstatic --noinput
RUN useradd --create-home kvdash && mkdir -p /app/var && chown -R kvdash /app/var
USER kvdash
EXPOSE 8000
CMD ["gunicorn", "kvdash.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
