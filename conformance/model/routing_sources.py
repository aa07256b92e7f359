"""The documents the routing table (``profiles/routing.toml``) and the routing oracle cite.

Kept beside the sources registry (``conformance.model.sources`` adds them to it): the AMQP 0-9-1
specification's own text for the topic and headers types (the XML leaves them out), RabbitMQ's
guides for its extensions, and RabbitMQ 3.10.8's source where only the code says what happens.
"""

from __future__ import annotations

from conformance.model.documents import Document, Section

RABBIT_SRC = "https://github.com/rabbitmq/rabbitmq-server/blob/v3.10.8/deps/rabbit/src"

ROUTING_DOCUMENTS: tuple[Document, ...] = (
    Document(
        "amqp0-9-1-pdf",
        "AMQP 0-9-1 specification (the PDF), section 3.1.3 Exchange Types",
        "AMQP Working Group",
        "https://www.rabbitmq.com/resources/specs/amqp0-9-1.pdf",
        {
            "direct": Section("3.1.3.1 The Direct Exchange Type: \"The message is passed to the message "
                              "queue if the routing key K = R\""),
            "fanout": Section("3.1.3.2 The Fanout Exchange Type: \"A message queue binds to the exchange "
                              "with no arguments. A publisher sends the exchange a message. The message is "
                              "passed to the message queue unconditionally\""),
            "topic": Section("3.1.3.3 The Topic Exchange Type: \"The routing key used for a topic exchange "
                             "MUST consist of zero or more words delimited by dots … * matches a single "
                             "word, and # matches zero or more words\""),
            "headers": Section("3.1.3.4 The Headers Exchange Type: x-match 'all' (AND) / 'any' (OR); "
                               "\"A field in the bind arguments matches a field in the message if either the "
                               "field in the bind arguments has no value and a field of the same name is "
                               "present in the message headers or if the field in the bind arguments has a "
                               "value and a field of the same name exists in the message headers and has "
                               "that same value\""),
        },
        "the matching rules of the four standard exchange types (the XML has only their names)",
    ),
    Document(
        "rabbitmq-source-3.10.8",
        "RabbitMQ server source, v3.10.8",
        "RabbitMQ (GitHub)",
        RABBIT_SRC,
        {
            "topic-split": Section("rabbit_exchange_type_topic.erl split_topic_key/1: the empty key is no "
                                   "words (<<>> -> []), a.b. is [a, b, \"\"]"),
            "headers-match": Section("rabbit_exchange_type_headers.erl headers_match/2: x-match all / any / "
                                     "all-with-x / any-with-x, x- entries left out unless *-with-x, a void "
                                     "binding value means presence, other values compared with == (the "
                                     "type is not compared; 1 == 1.0, \"1\" =/= 1)"),
            "headers-validate": Section("rabbit_exchange_type_headers.erl validate_binding/2: an x-match "
                                        "other than all, any, all-with-x, any-with-x is refused"),
            "route": Section("rabbit_exchange.erl route/2: every exchange reached is routed once (cycles "
                             "end), an exchange whose own bindings match nothing hands the message to its "
                             "alternate exchange, queues are deduplicated"),
        },
        "where RabbitMQ's routing is only stated by its code",
    ),
    Document(
        "rabbitmq-e2e",
        "Exchange to Exchange Bindings",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/e2e",
        {"e2e": Section("exchange.bind: \"messages flow from the source to the destination\", the "
                        "destination routes them by its own type and bindings; cycles are allowed")},
        "exchange.bind / exchange.unbind",
    ),
    Document(
        "rabbitmq-local-random",
        "Local Random Exchange",
        "RabbitMQ docs",
        "https://www.rabbitmq.com/docs/local-random-exchange",
        {"overview": Section("\"Local random exchange is a new exchange type in RabbitMQ 4.0 … If there are "
                             "multiple local queues bound to the exchange, one of them will be picked at "
                             "random to deliver the message to\"", "overview")},
        "the x-local-random exchange type (RabbitMQ 4.0)",
    ),
    Document(
        "rabbitmq-dotnet-client-1922",
        "rabbitmq-dotnet-client pull request 1922 (ExchangeType)",
        "RabbitMQ (GitHub)",
        "https://github.com/rabbitmq/rabbitmq-dotnet-client/pull/1922",
        {"modulus-hash": Section("\"x-modulus-hash is an built-in exchange type as of RabbitMQ 4.3.0\" "
                                 "(Michael Klishin, RabbitMQ core team)")},
        "x-modulus-hash built in from RabbitMQ 4.3.0",
    ),
)
