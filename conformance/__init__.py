"""amqp-conformance: an AMQP 0-9-1 conformance suite that can be pointed at any broker."""

# The package's one version string: pyproject.toml reads it ([tool.setuptools.dynamic]), the CLI,
# the result records and the reference broker's server-properties report it.
__version__ = "0.1.0"
