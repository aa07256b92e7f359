# The suite as an image: run it against any broker URL.
#   docker build -t amqp-conformance .
#   docker run --rm --network host amqp-conformance run --broker-url amqp://guest:guest@127.0.0.1:5672/
FROM python:3.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/amqp-conformance
COPY pyproject.toml README.md ./
COPY conformance ./conformance
RUN pip install --no-cache-dir '.[fast]'
WORKDIR /work
ENTRYPOINT ["amqp-conformance"]
CMD ["run"]
