# The image of the project's user code: the gRPC code server of pin_chessboard_pipelines.definitions,
# which the Dagster Helm chart runs as a user-code deployment and launches again as run and step
# pods (deploy/helm/values.yaml, docs/deployment.md#kubernetes). No configuration is baked in: every
# variable of README.md#configuration comes from the pod's environment (the chart's Secret). Nothing
# of the demo: not the extra [demo] (embedded PostgreSQL, Tansu broker) nor the Talent simulator
# (.dockerignore).
#
#   docker build -t pin-chessboard-pipelines:0.1.0 .
#
# BASE_IMAGE: any Debian-based image with python3.11 and its venv module at /usr/bin or
# /usr/local/bin (python:3.11-slim-bookworm by default). BUILD_CA_BUNDLE: a CA bundle for pip at build
# time, for a build behind a TLS-inspecting proxy (mounted into the build, not kept in the image).
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG BUILD_CA_BUNDLE=
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    DAGSTER_HOME=/opt/dagster/dagster_home \
    PIN_CHESSBOARD_STATE_DIR=/var/lib/pin-chessboard

RUN python3 -m venv /opt/venv
WORKDIR /opt/pin_chessboard_pipelines
# dependencies first, in a layer of their own: a change of the code does not reinstall them. The
# versions of requirements.lock (constraints: only the packages of `.[k8s]` are installed), the ones
# the suite tested
COPY pyproject.toml requirements.lock ./
RUN if [ -n "$BUILD_CA_BUNDLE" ]; then export PIP_CERT="$BUILD_CA_BUNDLE"; fi \
    && mkdir pin_chessboard_pipelines && touch pin_chessboard_pipelines/__init__.py \
    && pip install --constraint requirements.lock ".[k8s]" \
    && pip uninstall --yes pin_chessboard_pipelines && rm -rf pin_chessboard_pipelines build
COPY dagster.yaml workspace.yaml ./
COPY pin_chessboard_pipelines ./pin_chessboard_pipelines
RUN if [ -n "$BUILD_CA_BUNDLE" ]; then export PIP_CERT="$BUILD_CA_BUNDLE"; fi \
    && pip install --no-deps ".[k8s]" && rm -rf build

# a user without a login shell or password; it owns only DAGSTER_HOME and the state folder
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin pin \
    && mkdir -p "$DAGSTER_HOME" "$PIN_CHESSBOARD_STATE_DIR" \
    && chown pin "$DAGSTER_HOME" "$PIN_CHESSBOARD_STATE_DIR"
USER 10001

EXPOSE 3030
CMD ["dagster", "code-server", "start", "--host", "0.0.0.0", "--port", "3030", \
     "--module-name", "pin_chessboard_pipelines.definitions"]
