"""One parsed broker URL (:class:`~conformance.protocol.wire.URL`) turned into what pika and
aio-pika take, so the library cases connect exactly where, and as, the raw client does.

Neither library reads RabbitMQ's URI query parameters: pika's ``URLParameters`` refuses
``cacertfile``/``verify``/``auth_mechanism`` (it has its own ``ssl_options`` spelling), aiormq
spells them ``cafile``/``no_verify_ssl``/``auth``. So the parsed URL (parsed once, by
conformance.targets.spec) gives the libraries explicit arguments: the same TLS context
(verification on by default), host, port, vhost and credentials.
"""

from __future__ import annotations

from typing import Any

from conformance.protocol.wire import URL

PIKA_MECHANISMS = ("PLAIN", "EXTERNAL")  # pika's credential classes
AIORMQ_MECHANISMS = ("PLAIN", "EXTERNAL")  # aiormq.auth.AuthMechanism


def _mechanism(u: URL, supported: tuple[str, ...], library: str) -> str:
    wanted = u.auth_mechanisms or ("PLAIN",)
    for mech in wanted:
        if mech in supported:
            return mech
    raise ValueError(
        f"{library} cannot use SASL mechanism {', '.join(wanted)} (it speaks {', '.join(supported)})"
    )


def pika_parameters(u: URL, timeout: float) -> Any:
    """``pika.ConnectionParameters`` for ``url`` with every socket/handshake/blocked wait bounded
    by ``timeout`` (the URL's ``connection_timeout`` bounds connecting). Heartbeats are off unless
    the URL asks for them (a blocking pika connection cannot answer them while a case waits
    elsewhere). ValueError (one line) for a URL pika cannot honour."""
    import pika
    from pika.credentials import ExternalCredentials, PlainCredentials

    mech = _mechanism(u, PIKA_MECHANISMS, "pika")
    credentials = ExternalCredentials() if mech == "EXTERNAL" else PlainCredentials(u.user, u.password)
    ctx = u.ssl_context()
    kwargs: dict[str, Any] = {}
    if u.channel_max is not None:
        kwargs["channel_max"] = u.channel_max
    if u.frame_max is not None:
        kwargs["frame_max"] = u.frame_max
    return pika.ConnectionParameters(
        host=u.host, port=u.port, virtual_host=u.vhost, credentials=credentials,
        ssl_options=pika.SSLOptions(ctx, server_hostname=u.tls_server_name) if ctx is not None else None,
        heartbeat=u.heartbeat or 0,
        socket_timeout=u.connection_timeout or timeout, stack_timeout=u.connection_timeout or timeout,
        blocked_connection_timeout=timeout, connection_attempts=1, **kwargs,
    )


def aio_pika_connect_kwargs(u: URL, timeout: float) -> dict[str, Any]:
    """Keyword arguments for ``aio_pika.connect(**kwargs)`` equivalent to ``url``. aiormq takes
    no channel_max/frame_max and no other SNI name than the host: a URL asking for those is
    refused (ValueError) rather than silently connected otherwise."""
    if u.channel_max is not None or u.frame_max is not None:
        raise ValueError("aio-pika cannot take channel_max/frame_max from the URL")
    if u.server_name_indication not in (None, u.host, "disable"):
        raise ValueError("aio-pika cannot send another TLS server name than the host")
    kwargs: dict[str, Any] = {
        "host": u.host, "port": u.port, "login": u.user, "password": u.password, "virtualhost": u.vhost,
        "ssl": u.tls, "timeout": u.connection_timeout or timeout,
    }
    ctx = u.ssl_context()
    if ctx is not None:
        kwargs["ssl_context"] = ctx
    if u.heartbeat is not None:
        kwargs["heartbeat"] = u.heartbeat  # a query option of aiormq's URL
    if _mechanism(u, AIORMQ_MECHANISMS, "aio-pika") == "EXTERNAL":
        kwargs["auth"] = "external"
    return kwargs
