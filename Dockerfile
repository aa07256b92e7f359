# The suite as an image: run it against any broker URL, build its report, gate it.
#   docker build -t amqp-conformance .
#   docker run --rm --network host amqp-conformance run --broker-url amqp://guest:guest@127.0.0.1:5672/
# The distribution is pinned (bookworm = Debian 12): the report needs a Java 17 runtime, and
# Debian 13 (python:3.11-slim today) has no openjdk-17 package.
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/amqp-conformance
COPY pyproject.toml README.md ./
COPY conformance ./conformance
# The report extra (PySpark) is part of the image: `run` builds the report of the run.
RUN pip install --no-cache-dir '.[report,fast]'
# Not root: the suite needs no privilege, and files it writes into a mounted folder stay the
# user's (run with --user "$(id -u):$(id -g)" to match the host's owner).
RUN useradd --create-home --uid 10001 --user-group conformance \
 && mkdir -p /work/reports && chown -R conformance:conformance /work
USER conformance
WORKDIR /work
ENTRYPOINT ["amqp-conformance"]
CMD ["run"]
