"""The broker URL parser against RabbitMQ's AMQP URI specification and its query parameters.

Examples from https://www.rabbitmq.com/uri-spec.html ("Appendix A: Examples") and
https://www.rabbitmq.com/docs/uri-query-parameters; the two deliberate differences (an empty
path is the vhost "/", TLS verification on by default) are tested as such.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pika
import pytest

from conformance.protocol.handshake import HandshakeError, choose_mechanism, sasl_response
from conformance.protocol.wire import URL, redact

# (URI, user, password, host, port, vhost): the spec's table, with its "absent" parts as the
# client's defaults (guest, guest, localhost, 5672, "/").
SPEC_EXAMPLES = [
    ("amqp://user:pass@host:10000/vhost", "user", "pass", "host", 10000, "vhost"),
    ("amqp://user%61:%61pass@ho%61st:10000/v%2fhost", "usera", "apass", "hoast", 10000, "v/host"),
    ("amqp://", "guest", "guest", "localhost", 5672, "/"),
    ("amqp://user@", "user", "guest", "localhost", 5672, "/"),
    ("amqp://user:pass@", "user", "pass", "localhost", 5672, "/"),
    ("amqp://host", "guest", "guest", "host", 5672, "/"),
    ("amqp://:10000", "guest", "guest", "localhost", 10000, "/"),
    ("amqp:///vhost", "guest", "guest", "localhost", 5672, "vhost"),
    ("amqp://host/%2f", "guest", "guest", "host", 5672, "/"),
    ("amqp://[::1]", "guest", "guest", "::1", 5672, "/"),
]


@pytest.mark.parametrize(("uri", "user", "password", "host", "port", "vhost"), SPEC_EXAMPLES)
def test_spec_examples(uri: str, user: str, password: str, host: str, port: int, vhost: str) -> None:
    u = URL.parse(uri)
    assert (u.user, u.password, u.host, u.port, u.vhost) == (user, password, host, port, vhost)
    assert not u.tls


def test_empty_user_and_password_are_kept_empty() -> None:
    # amqp://:@/ : the spec gives "" for user and password (not the defaults).
    u = URL.parse("amqp://:@/")
    assert (u.user, u.password, u.host) == ("", "", "localhost")


@pytest.mark.parametrize("uri", ["amqp://host/", "amqp://host", "amqp://host/%2F", "amqp://host/%2f"])
def test_empty_path_is_the_default_vhost_as_pika_reads_it(uri: str) -> None:
    # The spec's example gives "" for amqp://host/; pika (and aiormq) give "/", and the raw
    # client must open the vhost the pika/aio-pika cases open for the same URL.
    assert URL.parse(uri).vhost == "/" == pika.URLParameters(uri).virtual_host


def test_amqps_default_port_and_explicit_port() -> None:
    assert URL.parse("amqps://host").port == 5671
    assert URL.parse("amqps://host").tls
    assert URL.parse("amqps://host:5999").port == 5999
    assert URL.parse("amqp://host").port == 5672


def test_ipv6_literal_with_port_and_vhost() -> None:
    u = URL.parse("amqp://u:p@[fe80::1]:5673/v")
    assert (u.host, u.port, u.vhost) == ("fe80::1", 5673, "v")
    assert str(u).startswith("amqp://u:p@[fe80::1]:5673/v")


def test_query_options_of_the_rabbitmq_page() -> None:
    # "Example A" and "Example B" of the URI Query Parameters page.
    a = URL.parse("amqp://myhost?heartbeat=5&connection_timeout=10000")
    assert (a.heartbeat, a.connection_timeout) == (5, 10.0)
    b = URL.parse("amqps://myhost?cacertfile=/path/to/ca_certificate.pem"
                  "&certfile=/path/to/client_certificate.pem&keyfile=/path/to/client_key.pem"
                  "&verify=verify_peer&server_name_indication=myhost")
    assert (b.cacertfile, b.certfile, b.keyfile) == (
        "/path/to/ca_certificate.pem", "/path/to/client_certificate.pem", "/path/to/client_key.pem")
    assert b.verify and b.server_name_indication == "myhost" and b.tls_server_name == "myhost"
    c = URL.parse("amqps://myhost?verify=verify_none&server_name_indication=disable")
    assert not c.verify and c.tls_server_name is None
    d = URL.parse("amqp://h?frame_max=8192&channel_max=16&auth_mechanism=external&auth_mechanism=amqplain")
    assert (d.frame_max, d.channel_max, d.auth_mechanisms) == (8192, 16, ("EXTERNAL", "AMQPLAIN"))


def test_verification_is_on_by_default() -> None:
    ctx = URL.parse("amqps://h").ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    off = URL.parse("amqps://h?verify=verify_none").ssl_context()
    assert off is not None and off.verify_mode == ssl.CERT_NONE and not off.check_hostname
    assert URL.parse("amqp://h").ssl_context() is None


@pytest.mark.parametrize(("uri", "says"), [
    ("http://h", "unsupported URL scheme 'http'"),
    ("amqp://h?foo=1", "unknown URL option 'foo'"),
    ("amqp://h?cacertfile=/ca.pem", "needs amqps://"),
    ("amqp://h/a/b", "unencoded '/'"),
    ("amqp://h:99999", "bad port"),
    ("amqp://h?heartbeat=soon", "not a whole number"),
    ("amqp://h?heartbeat=-1", "negative"),
    ("amqps://h?verify=maybe", "verify_peer or verify_none"),
    ("amqp://h?auth_mechanism=kerberos", "not one of plain, amqplain, external"),
    ("amqp://h?connection_timeout=0", "no time to connect"),
    ("amqps://h?keyfile=/k.pem", "needs certfile"),
    ("amqp://[::1", "malformed broker URL"),
    ("amqp://u:p%ff@h", "not percent-encoded UTF-8"),
])
def test_bad_urls_fail_with_one_line(uri: str, says: str) -> None:
    with pytest.raises(ValueError) as info:
        URL.parse(uri)
    message = str(info.value)
    assert says in message and "\n" not in message
    assert "p%ff" not in message  # the password never shows


def test_unreadable_tls_files_are_one_line() -> None:
    with pytest.raises(ValueError, match="cannot load the TLS files"):
        URL.parse("amqps://h?cacertfile=/no/such/ca.pem").ssl_context()


@pytest.mark.parametrize("uri", [
    "amqp://user%61:%61pass@ho%61st:10000/v%2fhost",
    "amqps://u:p%40ss@[::1]:5999/%2F?heartbeat=5&connection_timeout=1500&auth_mechanism=external"
    "&cacertfile=%2Fca.pem&certfile=%2Fc.pem&keyfile=%2Fk.pem&password=kp&verify=verify_none",
    "amqp://:@/",
])
def test_str_round_trips(uri: str) -> None:
    u = URL.parse(uri)
    assert URL.parse(str(u)) == u


def test_with_changes_only_what_it_names() -> None:
    u = URL.parse("amqps://u:p@h:1/v?heartbeat=3")
    other = u.with_(vhost="w")
    assert other.vhost == "w" and other.heartbeat == 3 and other.tls and other.password == "p"


def test_redact_hides_login_and_key_passwords() -> None:
    shown = redact("amqps://u:s3cret@h/?certfile=/c&keyfile=/k&password=kp")
    assert "s3cret" not in shown and "kp" not in shown
    assert shown == "amqps://u:***@h/?certfile=/c&keyfile=/k&password=***"
    assert redact(URL.parse("amqp://u:s3cret@h")) == "amqp://u:***@h:5672/%2F"


def test_sasl_responses() -> None:
    assert sasl_response("PLAIN", "u", "p") == "\x00u\x00p"
    assert sasl_response("EXTERNAL", "u", "p") == ""
    # AMQPLAIN: a field table without its length prefix, as RabbitMQ's rabbit_auth_mechanism_amqplain reads it
    assert sasl_response("AMQPLAIN", "u", "p").encode("latin-1") == (
        b"\x05LOGINS\x00\x00\x00\x01u\x08PASSWORDS\x00\x00\x00\x01p")


def test_mechanism_choice_follows_the_url_and_the_offer() -> None:
    assert choose_mechanism(URL.parse("amqp://h"), "AMQPLAIN PLAIN") == "PLAIN"
    u = URL.parse("amqp://h?auth_mechanism=external&auth_mechanism=amqplain")
    assert choose_mechanism(u, "PLAIN AMQPLAIN") == "AMQPLAIN"
    assert choose_mechanism(u, "EXTERNAL PLAIN") == "EXTERNAL"
    with pytest.raises(HandshakeError) as info:
        choose_mechanism(URL.parse("amqp://h?auth_mechanism=external"), "PLAIN AMQPLAIN")
    assert info.value.stage == "mechanism"


def test_tls_files_are_a_ca_chain(tmp_path: Path) -> None:
    from conformance.targets.tlscerts import make_tls_files

    files = make_tls_files(tmp_path)
    ctx = ssl.create_default_context(cafile=str(files.ca))
    ctx.load_cert_chain(str(files.client_cert), str(files.client_key))  # the pair matches
    assert files.client_cn == "guest"


def test_command_line_tls_options_fold_into_the_url(tmp_path: Path) -> None:
    from conformance.targets.spec import target_spec, with_tls_options

    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    plain = URL.parse("amqp://h")
    assert with_tls_options(plain) == plain  # nothing given: the URL untouched
    u = target_spec(broker_url="amqps://u:p@h/v?heartbeat=4", tls_ca=str(ca), tls_insecure=True).url
    assert u is not None and (u.cacertfile, u.verify, u.heartbeat, u.vhost) == (str(ca), False, 4, "v")
    with pytest.raises(ValueError, match="need an amqps:// broker URL"):
        with_tls_options(plain, ca=str(ca))
    with pytest.raises(ValueError, match="no such file"):
        with_tls_options(URL.parse("amqps://h"), ca=str(tmp_path / "missing.pem"))
    with pytest.raises(ValueError, match="--tls-key needs --tls-cert"):
        with_tls_options(URL.parse("amqps://h"), key=str(ca))
