# assay's image, for docker-compose.yml (README "Running on several machines"): `assay serve`, `assay worker` and
# Prefect's server (the same Prefect as assay's client) all run it.
FROM python:3.11-slim

# ffmpeg: video metadata, timelines and clips; tesseract: OCR of pages without a text layer; ripgrep: as scripts/setup
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg tesseract-ocr ripgrep \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/assay

# torch's CPU build first (as scripts/setup does), so that nothing pulls its CUDA build; then the pinned requirements
COPY requirements.txt ./
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 \
    && pip install --no-cache-dir -r requirements.txt

# assay itself (only its packages: not the tests, the benchmarks or a local .venv)
COPY pyproject.toml README.md ./
COPY dsl dsl
COPY store store
COPY flows flows
COPY mcp_server mcp_server
RUN pip install --no-cache-dir --no-deps -e .

ENV PREFECT_SERVER_ANALYTICS_ENABLED=false \
    HF_HUB_OFFLINE=1 \
    PYTHONUNBUFFERED=1

CMD ["assay", "--help"]
