"""One parsed target: what ``--broker``, ``--broker-url``, the TLS options and the cluster options
of any command say, checked once into a typed value.

Every command that reaches a broker (``run``, plain ``pytest --broker-url``, ``mutate``, ``fuzz``,
``bench broker``, ``faults``) turns its options into a :class:`TargetSpec` through
:func:`target_spec`, and :func:`conformance.targets.open_target` takes nothing else. The rules
(which kind needs which option, what TLS and the cluster options combine with) live here and
nowhere else, each a one-line ``ValueError`` naming the option.

:func:`parse_url` is the one place a broker URL string becomes a
:class:`~conformance.protocol.wire.URL`: what a user typed, an environment twin, a URL handed to
an xdist worker or a ``--cluster-url`` node. Downstream, every function takes the parsed value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conformance.protocol.wire import URL
from conformance.targets.kinds import kind_of, kinds, spellings, tls_capable

#: node actions a cluster target's command templates may name (``--cluster-cmd-ACTION``)
CLUSTER_ACTIONS = ("kill", "start", "pause", "resume", "partition", "heal")
#: the kinds a --cluster-url cluster or a local cluster are started as
USER_CLUSTER = "cluster"


def parse_url(text: str) -> URL:
    """``text`` as a broker URL (RabbitMQ's URI form and query options); ValueError of one line
    (the password redacted) when it is not one."""
    return URL.parse(text)


def parse_urls(text: str | Iterable[str]) -> tuple[URL, ...]:
    """One URL per node: a comma list, or several of them (a repeated option)."""
    items = [text] if isinstance(text, str) else list(text)
    raw = tuple(u.strip() for item in items for u in item.split(",") if u.strip())
    if not raw:
        raise ValueError("takes one amqp:// URL per node (repeated or a comma list)")
    if len(set(raw)) != len(raw):
        raise ValueError("names the same node twice")
    return tuple(parse_url(u) for u in raw)


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster options: a local cluster's size, or the nodes of one a user runs with the
    commands that act on them (``{node}`` in a template: its name)."""

    size: int = 3
    urls: tuple[URL, ...] = ()
    templates: tuple[tuple[str, str], ...] = ()  # (action, command template), in CLUSTER_ACTIONS order
    node_names: tuple[str, ...] = ()  # what {node} stands for (default: each URL's host)
    inject_loss: float | None = None  # a proxy drops this share of confirmed publishes (the proof)

    @property
    def names(self) -> tuple[str, ...]:
        return self.node_names or tuple(u.host for u in self.urls)

    def template(self, action: str) -> str | None:
        return dict(self.templates).get(action)


@dataclass(frozen=True)
class TargetSpec:
    """A target as the options name it, checked: ``kind`` is the registry's kind (``url`` for a
    ``--broker-url``, ``cluster`` for ``--cluster-url`` nodes), ``url`` the parsed URL of a url
    target (the TLS options folded in)."""

    kind: str = "reference"
    url: URL | None = None
    tls: bool = False  # a spawned kind listens with TLS
    restart_cmd: str | None = None  # a url target's restart command
    cluster: ClusterSpec = field(default_factory=ClusterSpec)

    @property
    def is_cluster(self) -> bool:
        k = kind_of(self.kind)
        return k is not None and k.cluster

    def describe(self) -> str:
        """How messages name it: the kind, and a url target's address without its password."""
        from conformance.protocol.wire import redact

        return f"url {redact(self.url)}" if self.url is not None else self.kind


def _tls_folded(url: URL, ca: str | None, cert: str | None, key: str | None, insecure: bool) -> URL:
    """``url`` with ``--tls-ca/--tls-cert/--tls-key/--tls-insecure`` as its own options (each
    overrides the URL's cacertfile/certfile/keyfile/verify), so every client reads TLS from it."""
    if ca is None and cert is None and key is None and not insecure:
        return url
    if not url.tls:
        raise ValueError("--tls-ca/--tls-cert/--tls-key/--tls-insecure need an amqps:// broker URL")
    if key is not None and cert is None and url.certfile is None:
        raise ValueError("--tls-key needs --tls-cert (or certfile= in the URL)")
    for flag, path in (("--tls-ca", ca), ("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{flag} {path}: no such file")
    return url.with_(cacertfile=ca or url.cacertfile, certfile=cert or url.certfile,
                     keyfile=key or url.keyfile, verify=url.verify and not insecure)


def with_tls_options(url: URL, *, ca: str | None = None, cert: str | None = None, key: str | None = None,
                     insecure: bool = False) -> URL:
    """A target's own URL (a spawned broker's, a restricted user's) with the command line's TLS
    options folded in, by the same rules as a ``--broker-url``."""
    return _tls_folded(url, ca, cert, key, insecure)


def _cluster(kind: str, url: URL | None, size: int | None, urls: tuple[URL, ...],
             templates: Mapping[str, str], node_names: Sequence[str],
             inject_loss: float | None) -> ClusterSpec:
    if urls and kind not in ("", USER_CLUSTER):
        raise ValueError(f"--cluster-url names a cluster's nodes; it cannot be combined with --broker {kind}")
    if urls and url is not None:
        raise ValueError("--cluster-url and --broker-url both name the target: give one")
    if kind == USER_CLUSTER and not urls:
        raise ValueError("--broker cluster needs --cluster-url (one amqp:// URL per node)")
    for action, template in templates.items():
        if action not in CLUSTER_ACTIONS:
            raise ValueError(f"--cluster-cmd-{action}: unknown action (known: {', '.join(CLUSTER_ACTIONS)})")
        if action != "heal" and "{node}" not in template:
            raise ValueError(f"--cluster-cmd-{action} {template!r} does not name the node: "
                             "put {node} in it")
        if not urls:
            raise ValueError(f"--cluster-cmd-{action} acts on the nodes of --cluster-url, which is not given")
    if node_names and not urls:
        raise ValueError("--cluster-node-names names --cluster-url nodes; give --cluster-url")
    if node_names and len(node_names) != len(urls):
        raise ValueError(f"--cluster-node-names gives {len(node_names)} names for {len(urls)} "
                         "--cluster-url nodes")
    if size is not None and size < 1:
        raise ValueError(f"--cluster-size {size}: at least 1 node")
    ordered = tuple((a, templates[a]) for a in CLUSTER_ACTIONS if a in templates)
    return ClusterSpec(size=size or 3, urls=urls, templates=ordered, node_names=tuple(node_names),
                       inject_loss=inject_loss)


def check_kind(text: str) -> str:
    """``text`` as a ``--broker`` kind of the registry; ValueError (without the option's name)."""
    k = kind_of(text)
    if k is None:
        raise ValueError(f"names an unknown target {text!r} (use {spellings()})")
    if k.prefix and not text[len(k.name):]:
        raise ValueError(f"names no {k.metavar or 'argument'} (use {k.spelling})")
    return text


def _kind(broker: str | None) -> str:
    kind = (broker or "").strip()
    if kind:
        try:
            check_kind(kind)
        except ValueError as exc:
            raise ValueError(f"--broker {exc}") from exc
    return kind


def _url(broker_url: str | URL | None) -> URL | None:
    if not broker_url or isinstance(broker_url, URL):
        return broker_url or None
    try:
        return parse_url(broker_url)
    except ValueError as exc:
        raise ValueError(f"--broker-url takes amqp://user:pass@host:port/vhost: {exc}") from exc


def _node_urls(given: str | Sequence[str] | tuple[URL, ...]) -> tuple[URL, ...]:
    if not given:
        return ()
    if all(isinstance(u, URL) for u in given):
        return tuple(given)  # type: ignore[arg-type]
    try:
        return parse_urls(given)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"--cluster-url {exc}") from exc


def target_spec(*, broker: str | None = None, broker_url: str | URL | None = None, tls: bool = False,
                tls_ca: str | None = None, tls_cert: str | None = None, tls_key: str | None = None,
                tls_insecure: bool = False, restart_cmd: str | None = None, cluster_size: int | None = None,
                cluster_urls: str | Sequence[str] | tuple[URL, ...] = (),
                cluster_templates: Mapping[str, str] | None = None, cluster_node_names: Sequence[str] = (),
                cluster_inject_loss: float | None = None, default: str = "reference") -> TargetSpec:
    """The options of a command as one checked target; ValueError (one line naming the option)
    for a value or a combination that cannot work. ``default``: the kind when none is named."""
    kind = _kind(broker)
    url = _url(broker_url)
    urls = _node_urls(cluster_urls)
    cluster = _cluster(kind, url, cluster_size, urls, dict(cluster_templates or {}), cluster_node_names,
                       cluster_inject_loss)
    if kind == "url" and url is None:
        raise ValueError("--broker url needs --broker-url amqp://user:pass@host:port/vhost")
    if url is not None and kind not in ("", "url", "reference"):
        raise ValueError(f"--broker-url names the target; it cannot be combined with --broker {kind}")
    if tls and url is not None:
        raise ValueError("--tls spawns a broker with a TLS listener; for --broker-url give an amqps:// URL")
    resolved = "url" if url is not None else (USER_CLUSTER if urls else (kind or default))
    if tls:
        k = kind_of(resolved)
        if k is not None and not k.tls:
            able = " and ".join(x.name for x in kinds(tls_capable))
            raise ValueError(f"--tls is available for {able}, not {resolved}")
    if url is not None:
        url = _tls_folded(url, tls_ca, tls_cert, tls_key, tls_insecure)
    return TargetSpec(kind=resolved, url=url, tls=tls, restart_cmd=restart_cmd or None, cluster=cluster)
