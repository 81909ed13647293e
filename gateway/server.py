"""The gateway process: one asyncio loop (uvloop when importable) serving the Kafka protocol.

`GatewayServer` wires the pieces: the handler registry (ApiVersions, FindCoordinator, the data
plane APIs, then any extension such as the group layer), the dispatcher, one `KafkaConnection`
protocol per client, the data plane and the optional Prometheus endpoint.

Extension point: `GatewayServer(config, extensions=[install])` calls `install(server)` before
serving; an extension registers handlers on `server.registry`, subscribes to topic changes with
`server.plane.subscribe(...)`, reads `server.plane.metadata_image()`, and adds metrics on
`server.metrics`.

Listeners (gateway.listeners): one asyncio server per entry of `listeners`, the main one first;
an SSL listener gets its TLS context here (gateway.tls), so a failed handshake (an untrusted
or expired certificate, plaintext bytes on the TLS port) closes the socket before any Kafka
connection exists. Each connection knows its listener's name, which Metadata, FindCoordinator
and DescribeCluster answer with (`ClusterView.endpoint_for`), and its principal.

Shutdown (SIGTERM/SIGINT): stop accepting, stop reading new requests, release long-polling
fetches, wait for every request already read to be answered and written (bounded by a grace
period), close the connections, then close storage (waiting for pending fsyncs) and exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import itertools
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import structlog

from gateway.allocator import set_arena_max, start_stats_dump
from gateway.api_versions import ApiVersionsApi
from gateway.audit import AuditLog
from gateway.authorizer import Authorizer
from gateway.authorizer.acl_apis import AclApis
from gateway.authorizer.checks import install_checks
from gateway.authorizer.model import CLUSTER_NAME, AclOperation, ResourceType
from gateway.cluster import ClusterView, NodeEndpoint
from gateway.config import ServerConfig
from gateway.connection import FrameHandler, KafkaConnection, RequestBytesPool
from gateway.dataplane.apis import register_dataplane_apis
from gateway.dataplane.configs import static_broker_configs
from gateway.dataplane.datadir import DataDirLock
from gateway.dataplane.plane import DataPlane
from gateway.dataplane.store import StoreFactory, open_segment_store
from gateway.dispatch import Dispatcher
from gateway.find_coordinator import FindCoordinatorApi
from gateway.listeners import Listener
from gateway.loop_lag import LoopLagMonitor
from gateway.metrics import MetricsRegistry, serve_metrics
from gateway.registry import HandlerRegistry, RequestContext
from gateway.sasl.authenticator import SaslListenerSetup
from gateway.sasl.credentials import ScramCredentialStore
from gateway.sasl.delegation_token_apis import DelegationTokenRefusals
from gateway.sasl.gate import GATE_ATTRIBUTE, SaslBounds, SaslGate
from gateway.sasl.illegal_state_apis import register_sasl_apis
from gateway.sasl.jaas import parse_jaas
from gateway.sasl.mechanism import ServerMechanism
from gateway.sasl.mechanisms import MECHANISMS
from gateway.sasl.scram_apis import ScramCredentialApis
from gateway.sasl.setup import MechanismSetup
from gateway.tls import (
    RELOADED_KEYS,
    PrincipalMapper,
    server_context,
)
from gateway.tls_connection import TlsKafkaConnection
from records.errors import LogError

log = structlog.get_logger("gateway")

Extension = Callable[["GatewayServer"], object]

SHUTDOWN_GRACE_SECONDS = 10.0
# A client that opens a TLS listener's port and never completes the handshake is dropped after
# this long (asyncio's default is 60 s; Kafka has no separate bound but idles out connections).
TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0


def advertised_host(listener: Listener) -> str:
    """What clients are told to connect to: `advertised.listeners`, else the bind address, else
    (bound to every interface) the host's name, as Kafka advertises for an empty host."""
    return listener.advertised_host or socket.getfqdn()


def host_port(host: str, port: int) -> str:
    """`HOST:PORT` as Kafka writes a listener, an IPv6 literal in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ListenerTls:
    """One SSL listener's TLS state and its principal mapping rules.

    The listening socket keeps one context for its life (asyncio binds it when serving starts);
    a dynamic keystore or truststore update builds a whole new context, and the listening one's
    SNI callback, which OpenSSL calls for every handshake (with or without a server name), moves
    each new connection onto the newest. Open connections keep the context they started with."""

    def __init__(self, listener: Listener, dynamic: dict[str, str]) -> None:
        self.listener = listener
        self.applied = self.settings(dynamic)
        self.context = server_context(self.applied)
        self.current = self.context
        self.context.sni_callback = self._newest
        self.mapper = PrincipalMapper(self.applied.get("ssl.principal.mapping.rules"))

    def _newest(self, ssl_object: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        if self.current is not self.context:
            ssl_object.context = self.current

    def settings(self, dynamic: dict[str, str]) -> dict[str, str]:
        """The static settings, overridden by dynamic `listener.name.<name>.ssl.*` broker configs."""
        prefix = self.listener.prefix
        return {
            **self.listener.settings,
            **{k[len(prefix) :]: v for k, v in dynamic.items() if k.startswith(prefix)},
        }

    def check(self, dynamic: dict[str, str]) -> str | None:
        """Why these dynamic settings cannot be applied, or None (they load, or change nothing)."""
        wanted = self.settings(dynamic)
        if all(wanted.get(k) == self.applied.get(k) for k in RELOADED_KEYS):
            return None
        try:
            server_context(wanted)
        except (ValueError, OSError, ssl.SSLError) as e:
            return str(e)
        return None

    def update(self, dynamic: dict[str, str]) -> bool:
        """Load the stores again when a dynamic update changed them; True if it did."""
        wanted = self.settings(dynamic)
        if all(wanted.get(k) == self.applied.get(k) for k in RELOADED_KEYS):
            return False
        self.current = server_context(wanted)
        self.applied = wanted
        return True


class GatewayServer:
    def __init__(
        self,
        config: ServerConfig,
        *,
        extensions: Sequence[Extension] = (),
        open_store: StoreFactory = open_segment_store,
        data_dir_lock: DataDirLock | None = None,
        ignore_topics_file: bool = False,
    ) -> None:
        """`data_dir_lock`: the data directory's `.lock` if the caller (`serve`) took it before
        its own checks; else the data plane takes it before reading anything there."""
        self.config = config
        self.registry = HandlerRegistry()
        self.metrics = MetricsRegistry()
        self.audit = AuditLog(self.metrics)
        """Where every security layer reports `auth.failed` and `acl.denied` (gateway.audit)."""
        self.plane = DataPlane(
            config.data_dir,
            node_id=config.node_id,
            num_partitions=config.num_partitions,
            auto_create_topics=config.auto_create_topics_enable,
            segment_bytes=config.log_segment_bytes,
            open_store=open_store,
            static_configs=static_broker_configs(
                {
                    **config.model_dump(by_alias=True, exclude={"group"}),
                    **config.group.model_dump(by_alias=True),
                },
                config.data_dir,
                config.listeners,
            ),
            lock=data_dir_lock,
            ignore_topics_file=ignore_topics_file,
            max_partitions=config.max_partitions,
            open_files_max=config.log_open_files_max,
        )
        self.listeners = config.served_listeners
        endpoints = {
            listener.name: NodeEndpoint(
                config.node_id, advertised_host(listener), listener.advertised_port or listener.port
            )
            for listener in self.listeners
        }
        self.cluster = ClusterView(self.plane.cluster_id, endpoints[self.listeners[0].name], endpoints)
        # TLS contexts are built before serving, so a bad keystore stops the start-up.
        self.tls: dict[str, ListenerTls] = {
            listener.name: ListenerTls(listener, self._dynamic_broker_configs())
            for listener in self.listeners
            if listener.uses_tls
        }
        # SCRAM users are read before any listener opens (a damaged file stops the start-up),
        # and each SASL listener's mechanisms are set up (a bad JAAS entry stops it too).
        self.scram = ScramCredentialStore.load(config.data_dir)
        self.sasl: dict[str, SaslListenerSetup] = {
            listener.name: self._sasl_setup(listener) for listener in self.listeners if listener.uses_sasl
        }
        self.plane.configs.on_broker_change.append(self._on_broker_configs)
        self.plane.configs.broker_checks.append(self._check_broker_configs)
        self.api_versions = ApiVersionsApi(self.registry)
        self.api_versions.register()
        FindCoordinatorApi(self.cluster).register(self.registry)
        register_dataplane_apis(self.registry, self.plane, self.cluster)
        register_sasl_apis(self.registry)
        protocols = {listener.name: listener.protocol for listener in self.listeners}
        DelegationTokenRefusals(lambda name: protocols.get(name, "PLAINTEXT")).register(self.registry)
        self.scram_apis = ScramCredentialApis(self.scram)
        """AlterUserScramCredentials / DescribeUserScramCredentials; the authorizer sets
        `self.scram_apis.authorize` (ALTER / DESCRIBE on CLUSTER)."""
        self.scram_apis.register(self.registry)
        # The ACLs are read here, before any listener opens (a damaged file stops the start-up).
        self.authorizer = (
            Authorizer(
                config.data_dir,
                super_users=config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
                audit=self.audit,
            )
            if config.authorizer_class_name
            else None
        )
        AclApis(self.authorizer).register(self.registry)
        if self.authorizer is not None:
            authorizer = self.authorizer

            def scram_authorize(ctx: RequestContext, operation: str) -> bool:
                # Kafka: DescribeUserScramCredentials needs DESCRIBE, AlterUserScramCredentials
                # ALTER, on the CLUSTER resource.
                op = AclOperation.ALTER if operation == "ALTER" else AclOperation.DESCRIBE
                return authorizer.authorize(
                    ctx,
                    op,
                    ResourceType.CLUSTER,
                    CLUSTER_NAME,
                    api=f"{operation.title()}UserScramCredentials",
                )

            self.scram_apis.authorize = scram_authorize
        # Extensions may run code once the loop runs (`on_start(loop)`) and on shutdown after
        # the connections are drained (`on_stop()`), e.g. the group layer's shard runtimes.
        self.on_start: list[Callable[[asyncio.AbstractEventLoop], None]] = []
        self.on_stop: list[Callable[[], None]] = []
        # Readiness checks for `/health/ready` (name -> holds now), e.g. the group layer's
        # "every coordinator shard is loaded"; the listener's own check is added here.
        self.ready_checks: dict[str, Callable[[], bool]] = {"listener_accepting": self._accepting}
        # `on_connection_lost` hooks see every closed connection; `extra_servers` (listeners an
        # extension opened) stop accepting together with the main one.
        self.on_connection_lost: list[Callable[[KafkaConnection], None]] = []
        self.extra_servers: list[asyncio.Server] = []
        for install in extensions:
            install(self)
        if self.authorizer is not None:
            # Every served API, whoever registered it, states its checks in one table.
            install_checks(self.registry, self.authorizer, self.plane)
        self.dispatcher = Dispatcher(
            self.registry,
            self.metrics,
            unsupported_api_versions=self.api_versions.unsupported_version_response,
        )
        # The frame handler of new connections: the dispatcher, unless an extension (upstream
        # mode) wraps it in `on_start`.
        self.frame_handler: FrameHandler = self.dispatcher.on_frame
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        # Bytes of requests still arriving, server-wide (`queued.max.request.bytes`; <= 0: none).
        queued_max = config.queued_max_request_bytes
        self.request_pool = RequestBytesPool(queued_max) if queued_max > 0 else None
        # Live Python heap blocks next to the process RSS: when RSS grows and this does not, the
        # growth is the allocator keeping freed memory, not state kept (docs/robustness.md, soak).
        self.metrics.gauge(
            "groupshift_python_allocated_blocks", "Memory blocks currently allocated by the interpreter"
        ).set_function(lambda: float(sys.getallocatedblocks()))
        self._server: asyncio.Server | None = None
        self._listener_servers: list[asyncio.Server] = []
        self._bound_ports: list[int] = []
        self._metrics_server: asyncio.Server | None = None
        self._sasl_logins = self.metrics.counter(
            "groupshift_sasl_authentications_total",
            "Successful SASL authentications and KIP-368 re-authentications, by listener and mechanism",
            ("listener", "mechanism", "kind"),
        )
        self._accepted = self.metrics.counter(
            "groupshift_connections_accepted_total", "Client connections accepted"
        )
        self.metrics.gauge("groupshift_connections", "Client connections open").set_function(
            lambda: len(self._connections)
        )
        self.metrics.gauge(
            "groupshift_connections_muted",
            "Client connections not read for back-pressure (answers unread, requests in flight, "
            "or the request byte budget)",
        ).set_function(lambda: float(sum(1 for c in self._connections if c.muted)))
        self.metrics.gauge(
            "groupshift_queued_request_bytes",
            "Bytes reserved for requests still arriving (queued.max.request.bytes)",
        ).set_function(lambda: float(0 if self.request_pool is None else self.request_pool.reserved))
        self.metrics.gauge("groupshift_topics", "Topics in the embedded data plane").set_function(
            lambda: len(self.plane.topics)
        )
        # The descriptor budget of the partition logs (`log.open.files.max`, docs/robustness.md).
        self.metrics.gauge(
            "groupshift_partition_log_open_files", "File descriptors held by open partition logs"
        ).set_function(lambda: float(self.plane.file_budget.open_files))
        self.loop_lag = LoopLagMonitor(self.config.loop_lag_warn_ms / 1000)
        self.loop_lag.register_metrics(self.metrics)

    def _sasl_setup(self, listener: Listener) -> SaslListenerSetup:
        """The mechanisms of a SASL listener, built by their factories (`gateway.sasl.mechanisms`)."""
        constructors: dict[str, Callable[[], ServerMechanism]] = {}
        reauth: dict[str, int] = {}
        for mechanism in listener.sasl_mechanisms:
            jaas_text = listener.sasl.get(f"{mechanism.lower()}.sasl.jaas.config")
            setup = MechanismSetup(
                listener_name=listener.name,
                mechanism=mechanism,
                settings=listener.sasl,
                jaas=None if jaas_text is None else parse_jaas(jaas_text),
                scram=self.scram,
            )
            constructors[mechanism] = MECHANISMS[mechanism](setup)
            own = listener.sasl.get(f"{mechanism.lower()}.connections.max.reauth.ms")
            shared = listener.sasl.get("connections.max.reauth.ms")
            reauth[mechanism] = int(own or shared or self.config.connections_max_reauth_ms)
        return SaslListenerSetup(listener.sasl_mechanisms, constructors, reauth)

    def _sasl_authenticated(self, listener: str, mechanism: str, reauthentication: bool) -> None:
        kind = "reauthentication" if reauthentication else "authentication"
        self._sasl_logins.labels(listener, mechanism, kind).inc()

    def _sasl_bounds(self, listener: Listener) -> SaslBounds:
        own = listener.sasl.get("sasl.server.max.receive.size")
        api_versions = self.registry.get(18)
        return SaslBounds(
            max_receive_bytes=int(own) if own else self.config.sasl_server_max_receive_size,
            timeout_ms=self.config.sasl_server_authentication_timeout_ms,
            failed_delay_ms=self.config.connections_failed_authentication_delay_ms,
            max_frame_bytes=self.config.socket_request_max_bytes,
            api_versions_max=0 if api_versions is None else api_versions.max_version,
        )

    def _new_connection(self, listener: Listener | None = None) -> KafkaConnection:
        listener = listener or self.listeners[0]
        tls = self.tls.get(listener.name)
        sasl = self.sasl.get(listener.name)
        gate = (
            None
            if sasl is None
            else SaslGate(
                sasl,
                self._sasl_bounds(listener),
                self.frame_handler,
                self.audit,
                functools.partial(self._sasl_authenticated, listener.name),
            )
        )
        conn = (KafkaConnection if tls is None else TlsKafkaConnection)(
            connection_id=next(self._ids),
            on_frame=self.frame_handler if gate is None else gate.on_frame,
            max_frame_bytes=self.config.socket_request_max_bytes,
            on_lost=self._connection_lost,
            response_buffer_bytes=self.config.socket_response_buffer_max_bytes,
            request_pool=self.request_pool,
        )
        conn.ctx.listener_name = listener.name
        if isinstance(conn, TlsKafkaConnection) and tls is not None:
            conn.mapper = tls.mapper
            conn.audit = self.audit
        if gate is not None:
            gate.attach(conn)
        self._connections.add(conn)
        self._accepted.inc()
        return conn

    def _accepting(self) -> bool:
        return self._server is not None and self._server.is_serving()

    def readiness(self) -> dict[str, bool]:
        return {name: check() for name, check in self.ready_checks.items()}

    def new_connection(self) -> KafkaConnection:
        """Protocol factory of every listener (extensions open more with it)."""
        return self._new_connection()

    def _connection_lost(self, conn: KafkaConnection) -> None:
        self._connections.discard(conn)
        gate = conn.ctx.attributes.get(GATE_ATTRIBUTE)
        if gate is not None:
            gate.connection_lost()
        for hook in self.on_connection_lost:
            hook(conn)

    @property
    def port(self) -> int:
        """The port the main listener is bound to (its advertised port may differ)."""
        return self._bound_ports[0] if self._bound_ports else self.cluster.node.port

    def ssl_context(self, listener: Listener | None = None) -> ssl.SSLContext | None:
        """The TLS context of `listener` (default: the main one), None on a PLAINTEXT listener;
        upstream mode's per-broker listeners use the main listener's."""
        tls = self.tls.get((listener or self.listeners[0]).name)
        return None if tls is None else tls.context

    def _dynamic_broker_configs(self) -> dict[str, str]:
        configs = self.plane.configs
        return {**configs.broker_default, **configs.broker}

    def _on_broker_configs(self) -> None:
        """A dynamic broker config changed: reload the keystores it updates (KIP-226)."""
        dynamic = self._dynamic_broker_configs()
        for name, tls in self.tls.items():
            try:
                if tls.update(dynamic):
                    log.info("gateway.keystore_reloaded", listener=name)
            except (ValueError, OSError, ssl.SSLError) as e:
                log.error("gateway.keystore_reload_failed", listener=name, error=str(e))

    def _check_broker_configs(self, dynamic: Mapping[str, str]) -> str | None:
        """Kafka validates a dynamic keystore update before accepting it (the new stores must
        load), so a bad update is refused and the serving context is never touched."""
        for name, tls in self.tls.items():
            problem = tls.check(dict(dynamic))
            if problem is not None:
                return (
                    f"Validation of dynamic config update of SSLFactory failed for listener {name}: {problem}"
                )
        return None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            tls = self.tls.get(listener.name)
            srv = await loop.create_server(
                functools.partial(self._new_connection, listener),
                listener.bind_host,
                listener.port,
                reuse_address=True,
                backlog=1024,
                ssl=None if tls is None else tls.context,
                ssl_handshake_timeout=None if tls is None else TLS_HANDSHAKE_TIMEOUT_SECONDS,
            )
            self._listener_servers.append(srv)
            bound = int(srv.sockets[0].getsockname()[1])
            self._bound_ports.append(bound)
            endpoint = self.cluster.endpoints[listener.name]
            if listener.advertised_port is None:
                endpoint.port = bound  # (the port may have been 0)
        exposed = [
            f"{lst.name}://{lst.bind_host}:{port}"
            for lst, port in zip(self.listeners, self._bound_ports, strict=True)
            if lst.protocol == "PLAINTEXT" and not is_loopback(lst.bind_host)
        ]
        if exposed and self.authorizer is None:  # one warning at start-up, naming every such listener
            log.warning(
                "gateway.plaintext_listener_exposed",
                listeners=exposed,
                message="PLAINTEXT listener on a non-loopback address and no authorizer: anyone "
                "who reaches it can read, write and delete every topic and group (docs/security.md)",
            )
        self._server = self._listener_servers[0]
        self.plane.configs.set_listener(
            ",".join(
                f"{lst.name}://{host_port(lst.host, port)}"
                for lst, port in zip(self.listeners, self._bound_ports, strict=True)
            ),
            ",".join(
                f"{name}://{host_port(endpoint.host, endpoint.port)}"
                for name, endpoint in self.cluster.endpoints.items()
            ),
        )
        self.loop_lag.start(loop)
        for hook in self.on_start:
            hook(loop)
        metrics_at = self.config.metrics_address
        if metrics_at is not None:
            self._metrics_server = await serve_metrics(self.metrics, *metrics_at, ready=self.readiness)
            mport = self._metrics_server.sockets[0].getsockname()[1]
            metrics_at = (metrics_at[0], int(mport))
        main = self.listeners[0]
        log.info(
            "gateway.listening",
            message=f"listening on {host_port(main.bind_host, self.port)}",
            host=main.bind_host,
            port=self.port,
            ports={lst.name: port for lst, port in zip(self.listeners, self._bound_ports, strict=True)},
            listeners=[
                f"{lst.name}({lst.protocol})://{lst.bind_host}:{port} advertised "
                f"{self.cluster.endpoints[lst.name].host}:{self.cluster.endpoints[lst.name].port}"
                for lst, port in zip(self.listeners, self._bound_ports, strict=True)
            ],
            node_id=self.cluster.node.node_id,
            cluster_id=self.cluster.cluster_id,
            build=_engine_build(),
            data_dir=str(self.config.data_dir),
            topics=len(self.plane.topics),
            apis=[f"{k}:{lo}-{hi}" for k, lo, hi in self.registry.advertised()],
            metrics=None if metrics_at is None else f"http://{metrics_at[0]}:{metrics_at[1]}/metrics",
        )

    async def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        log.info("gateway.stopping", connections=len(self._connections))
        self.loop_lag.stop()
        for srv in self._listener_servers:
            srv.close()
        for extra in self.extra_servers:
            extra.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        conns = list(self._connections)
        for conn in conns:
            conn.stop_reading()
        self.plane.wake_fetchers()
        pending = [conn.drain() for conn in conns if conn.in_flight]
        if pending:
            try:
                await asyncio.wait_for(asyncio.gather(*pending), grace)
            except TimeoutError:
                log.warning("gateway.shutdown_timeout", waited_seconds=grace)
        for conn in conns:
            conn.close("gateway.shutdown")
        # Let the transports flush and report connection_lost.
        for _ in range(100):
            if not self._connections:
                break
            await asyncio.sleep(0.01)
        for hook in self.on_stop:
            try:
                hook()
            except Exception as e:
                log.error("gateway.stop_hook_failed", error=str(e))
        await self.plane.close()
        log.info("gateway.stopped")

    async def serve_until_signal(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        await stop.wait()
        await self.stop()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        return None
    return uvloop.new_event_loop


def run(
    config: ServerConfig,
    *,
    extensions: Sequence[Extension] = (),
    data_dir_lock: DataDirLock | None = None,
    ignore_topics_file: bool = False,
) -> int:
    """Serve until SIGTERM/SIGINT; the process exit code. `data_dir_lock` and
    `ignore_topics_file` go to `GatewayServer`.

    Profiling hook (off by default): with `GROUPSHIFT_PROFILE=PATH` in the environment the whole
    serving life runs under cProfile and the stats are written to PATH on a graceful exit.
    """
    # Before any thread of the server allocates (`malloc.arena.max`, docs/robustness.md, Soak).
    set_arena_max(config.malloc_arena_max)
    trace_dir = os.environ.get("GROUPSHIFT_TRACEMALLOC")
    if trace_dir:
        _start_tracemalloc(
            Path(trace_dir),
            float(os.environ.get("GROUPSHIFT_TRACEMALLOC_EVERY", "60")),
            int(os.environ.get("GROUPSHIFT_TRACEMALLOC_FRAMES", "10")),
        )
    census_dir = os.environ.get("GROUPSHIFT_HEAP_CENSUS")
    if census_dir:
        from gateway.heap_census import start_census

        start_census(Path(census_dir), float(os.environ.get("GROUPSHIFT_HEAP_CENSUS_EVERY", "300")))
    stats_path = os.environ.get("GROUPSHIFT_MALLOC_STATS")
    if stats_path:
        start_stats_dump(Path(stats_path), float(os.environ.get("GROUPSHIFT_MALLOC_STATS_EVERY", "60")))
    profile_path = os.environ.get("GROUPSHIFT_PROFILE")
    start = functools.partial(
        _run, config, extensions, data_dir_lock=data_dir_lock, ignore_topics_file=ignore_topics_file
    )
    if not profile_path:
        return start()
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        return start()
    finally:
        profiler.disable()
        profiler.dump_stats(profile_path)


def _start_tracemalloc(out_dir: Path, every_s: float, frames: int = 10) -> None:
    """Memory-growth hook (off by default): with `GROUPSHIFT_TRACEMALLOC=DIR` allocations are
    traced (`GROUPSHIFT_TRACEMALLOC_FRAMES` frames, default 10: deep call chains tell which
    caller keeps an allocation made in a shared helper) from the first interval on, and a
    snapshot is written to DIR every `GROUPSHIFT_TRACEMALLOC_EVERY` seconds (default 60), so a
    soak can tell which code keeps memory (`bench.memory_growth` compares them).
    A daemon thread takes the snapshots: the event loop never waits for one."""
    import threading
    import tracemalloc

    out_dir.mkdir(parents=True, exist_ok=True)

    def dump_forever() -> None:
        # Tracing starts after the first interval, so start-up (imports, the log load) runs at
        # full speed and is not traced: what is traced is what serving keeps.
        time.sleep(every_s)
        tracemalloc.start(max(1, frames))
        n = 0
        while True:
            time.sleep(every_s)
            n += 1
            tracemalloc.take_snapshot().dump(str(out_dir / f"snapshot-{n:04d}.pickle"))

    threading.Thread(target=dump_forever, name="tracemalloc-dump", daemon=True).start()


def _run(
    config: ServerConfig,
    extensions: Sequence[Extension],
    *,
    data_dir_lock: DataDirLock | None,
    ignore_topics_file: bool,
) -> int:
    try:
        server = GatewayServer(
            config,
            extensions=extensions,
            data_dir_lock=data_dir_lock,
            ignore_topics_file=ignore_topics_file,
        )
    except (OSError, ValueError, LogError) as e:
        # Includes a data directory locked by another running gateway and state on disk that
        # cannot be loaded: one clear line and exit 1, never a traceback.
        log.error("gateway.start_failed", error=str(e))
        return 1
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        try:
            runner.run(server.serve_until_signal())
        except OSError as e:
            log.error("gateway.start_failed", error=str(e))
            with contextlib.suppress(Exception):
                runner.run(server.plane.close())
            return 1
    return 0


def _engine_build() -> str:
    """ "compiled (mypyc)" or "pure Python" (setup.py's optional build), logged at start so a
    benchmark's figures can be matched with the build that produced them."""
    import engine.shard

    return "pure Python" if (engine.shard.__file__ or "").endswith(".py") else "compiled (mypyc)"
