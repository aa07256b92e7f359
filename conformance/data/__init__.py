"""Package data: the AMQP 0-9-1 definition (amqp0-9-1.xml) and the result record's JSON Schema.

The bottom of the house: the protocol client (field domains) and the model (spec rules) read the
same file through these names."""

SPEC_PACKAGE = __name__
SPEC_FILE = "amqp0-9-1.xml"
