"""What a secured listener costs: ConsumerGroupHeartbeat/s and new connections/s over SSL and
SASL_SSL against PLAINTEXT, groupshift against Apache Kafka 4.x on the same listener type, in one
run (issue 26). `python -m bench.versus_kafka --security plaintext,ssl,sasl_ssl` runs it too.

    python -m bench.secure_listeners [--json] [--security plaintext,ssl,sasl_ssl]
                                     [--members 1000] [--groups 10] [--seconds 3]
                                     [--load CONNxDEPTH] [--workers 8] [--repeats 2]

For each listener type, one Kafka 4.x node (`harness.kafka_dist`, its client listener of that
type; the broker's JVM flags those of Kafka's start scripts) and one `groupshift serve` with a
listener of the same type run side by side, with the same certificate (the Kafka node's, from the
CA `harness.kafka_dist.security` makes), the same client principal and the same authorization
(none on both: `authorizer.class.name` empty, groupshift's default, set so on Kafka):

- SSL: TLS with `ssl.client.auth=required`; the client presents `admin`'s certificate.
- SASL_SSL: TLS, then SASL PLAIN as `admin` (Kafka's PlainLoginModule users on the broker, the
  listener's `plain.sasl.jaas.config` on groupshift).

Measured on each server, the server's every thread pinned to core 0 and this process (the load
generator) to core 1, the backends alternating run by run (kafka, groupshift, kafka, ...):

(a) steady ConsumerGroupHeartbeat/s: `bench.heartbeats`' setup and load generator, every
    connection of both opened through TLS (asyncio's `ssl=` transport) and the SASL login first;
    every answer checked;
(b) new connections/s: `--workers` concurrent loops, each connecting, completing the TLS
    handshake (and the SASL exchange), sending one ApiVersions v3, checking its answer and
    closing, for `--seconds`.

Printed per listener type (best of `--repeats` runs: other jobs on a shared machine only lower a
rate): each rate and the same per second of the server's CPU (counted from when the load's
connections are open), each relative to the server's own PLAINTEXT figure (what the listener
type costs) and groupshift's over Kafka's; and the load generator's CPU share (near 1.0: the
client, not the server, was the limit, and the rates are lower bounds for both servers). On a
loaded machine the per-CPU figures are the ones to read; compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import ssl
import struct
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench import heartbeats as hb
from protocol.client_security import ClientSecurity
from protocol.codec import decode_response, encode_request, response_type_of

try:
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

LISTENER_TYPES = ("plaintext", "ssl", "sasl_ssl")
MECHANISM = "PLAIN"
USER = "admin"
_P = TypeVar("_P", bound=asyncio.BaseProtocol)
_SIZE = struct.Struct(">i")


def listener_types(text: str) -> list[str]:
    """`--security` argument: comma-separated listener types, PLAINTEXT always measured first
    (the other types are reported relative to it)."""
    wanted = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [t for t in wanted if t not in LISTENER_TYPES]
    if bad:
        raise argparse.ArgumentTypeError(f"{', '.join(bad)}: listener types are {', '.join(LISTENER_TYPES)}")
    return ["plaintext", *(t for t in LISTENER_TYPES if t in wanted and t != "plaintext")]


# -- the client side: TLS handshake and SASL login on asyncio streams -----------------------------


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


async def _call(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: Any, correlation: int
) -> Any:
    writer.write(encode_request(req, correlation_id=correlation, client_id=hb.CLIENT_ID))
    got, answer = decode_response(response_type_of(req), await _read_frame(reader))
    if got != correlation:
        raise RuntimeError(f"answer to correlation id {got}, expected {correlation}")
    return answer


def _scram_proof(
    mechanism: str, password: str, salt: bytes, iterations: int, auth: bytes
) -> tuple[bytes, bytes]:
    """(ClientProof, ServerSignature) of RFC 5802 section 3."""
    name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    salted = _salted_password(name, password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", name)
    stored_key = hashlib.new(name, client_key).digest()
    signature = hmac.digest(stored_key, auth, name)
    server_key = hmac.digest(salted, b"Server Key", name)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True)), hmac.digest(
        server_key, auth, name
    )


_SALTED: dict[tuple[str, str, bytes, int], bytes] = {}


def _salted_password(name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi() of RFC 5802, remembered per salt as real clients may: thousands of PBKDF2 rounds per
    connection would make the load generator, not the server, the limit being measured."""
    key = (name, password, salt, iterations)
    if key not in _SALTED:
        _SALTED[key] = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    return _SALTED[key]


async def sasl_login(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mechanism: str, user: str, password: str
) -> None:
    """SaslHandshake v1 then SaslAuthenticate v1 rounds (KIP-152), as Kafka's clients log in;
    PLAIN is one token, SCRAM two rounds with the server's signature checked."""
    shake = await _call(reader, writer, hb.request(17, 1, mechanism=mechanism), 1)
    if shake.error_code:
        raise ConnectionError(f"SaslHandshake {mechanism}: error {shake.error_code} {shake.mechanisms}")

    async def token(data: bytes, correlation: int) -> bytes:
        answer = await _call(reader, writer, hb.request(36, 1, auth_bytes=data), correlation)
        if answer.error_code:
            raise ConnectionError(f"SaslAuthenticate: error {answer.error_code} {answer.error_message}")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await token(b"\0" + user.encode() + b"\0" + password.encode(), 2)
        return
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    server_first = (await token(f"n,,{first_bare}".encode(), 2)).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    if not fields["r"].startswith(nonce):
        raise ConnectionError("SCRAM: the server's nonce does not extend ours")
    final_bare = f"c=biws,r={fields['r']}"
    auth = f"{first_bare},{server_first},{final_bare}".encode()
    proof, server_signature = _scram_proof(
        mechanism, password, base64.b64decode(fields["s"]), int(fields["i"]), auth
    )
    server_final = (await token(f"{final_bare},p={base64.b64encode(proof).decode()}".encode(), 3)).decode()
    if server_final != f"v={base64.b64encode(server_signature).decode()}":
        raise ConnectionError(f"SCRAM: the server's signature does not verify: {server_final}")


# A StreamWriter closes its transport when it is garbage collected (asyncio.streams): the writer
# of a connection handed over to another protocol lives as long as that protocol.
_HANDED_OVER: weakref.WeakKeyDictionary[asyncio.BaseProtocol, asyncio.StreamWriter] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class SecuredClient:
    """How the benchmark reaches one listener, a `bench.heartbeats.Connector` too."""

    security: ClientSecurity = field(default_factory=ClientSecurity)

    async def open(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection on which Kafka requests may be sent: TLS handshake and SASL login done."""
        s = self.security
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=s.ssl_context, server_hostname="127.0.0.1" if s.ssl_context else None
        )
        if s.uses_sasl:
            try:
                await sasl_login(
                    reader, writer, s.sasl_mechanism or MECHANISM, s.username or "", s.password or ""
                )
            except BaseException:
                writer.transport.abort()
                raise
        return reader, writer

    async def __call__(self, port: int, factory: Callable[[], _P]) -> _P:
        """Open, then hand the transport to `factory()`'s protocol: the login's answers have all
        been read, so nothing is left in the stream reader's buffer."""
        _, writer = await self.open(port)
        proto = factory()
        writer.transport.set_protocol(proto)
        proto.connection_made(writer.transport)
        _HANDED_OVER[proto] = writer
        return proto

    def negotiated(self, port: int) -> str:
        """`TLSv1.3 TLS_AES_256_GCM_SHA384` (what one connection negotiated), or `-` for TCP."""

        async def probe() -> str:
            _, writer = await self.open(port)
            obj = writer.get_extra_info("ssl_object")
            writer.transport.abort()
            return "-" if obj is None else f"{obj.version()} {obj.cipher()[0]}"

        return asyncio.run(probe())


# -- (b) new connections per second ------------------------------------------------------------------


@dataclass
class ConnectionRate:
    connections_per_s: int
    p50_ms: float
    p99_ms: float
    server_cpu_share: float | None
    connections_per_server_cpu_s: int | None
    load_cpu_share: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def _connection_loop(client: SecuredClient, port: int, until: float, times: list[float]) -> None:
    req = hb.request(18, 3, client_software_name="bench", client_software_version="1")
    while time.perf_counter() < until:
        started = time.perf_counter()
        reader, writer = await client.open(port)
        try:
            answer = await _call(reader, writer, req, 100)
            if answer.error_code or not answer.api_keys:
                raise RuntimeError(f"ApiVersions answered error {answer.error_code}")
        finally:
            writer.close()
        times.append(time.perf_counter() - started)
        # the server's side of the close is not what is measured
        with suppress(TimeoutError, ConnectionError, ssl.SSLError):
            await asyncio.wait_for(writer.wait_closed(), 5)


async def _connections(
    client: SecuredClient, port: int, workers: int, seconds: float
) -> tuple[list[float], float]:
    times: list[float] = []
    started = time.perf_counter()
    until = started + seconds
    await asyncio.gather(*(_connection_loop(client, port, until, times) for _ in range(workers)))
    return times, time.perf_counter() - started


def connection_rate(
    client: SecuredClient, port: int, workers: int, seconds: float, server_pid: int | None = None
) -> ConnectionRate:
    """New connections/s (connect, TLS, SASL, one ApiVersions answered without error, close)
    from `workers` concurrent loops for `seconds`, after a short warm-up."""
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop else None)
    with runner:
        runner.run(_connections(client, port, workers, min(0.5, seconds)))
        cpu_before = None if server_pid is None else hb.cpu_seconds(server_pid)
        load_before = time.process_time()
        times, elapsed = runner.run(_connections(client, port, workers, seconds))
        load_cpu = time.process_time() - load_before
        cpu_after = None if server_pid is None else hb.cpu_seconds(server_pid)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return ConnectionRate(
        connections_per_s=round(len(times) / elapsed),
        p50_ms=round(hb.percentile(times, 0.5) * 1000, 2),
        p99_ms=round(hb.percentile(times, 0.99) * 1000, 2),
        server_cpu_share=None if cpu is None else round(cpu / elapsed, 2),
        connections_per_server_cpu_s=None if not cpu else round(len(times) / cpu),
        load_cpu_share=round(load_cpu / elapsed, 2),
    )


# -- the servers ----------------------------------------------------------------------------------------


def groupshift_sets(listener: str, security: Any) -> list[str]:
    """`--set`s giving groupshift one listener of type `listener` with the Kafka node's
    certificate and truststore (`security`: its harness.kafka_dist.security.KafkaSecurity)."""
    if listener == "plaintext":
        return []
    name = listener.upper()
    sets = [
        f"listeners={name}://127.0.0.1:0",
        "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={security.broker_cert.p12}",
        f"ssl.keystore.password={security.store_password}",
        "ssl.truststore.type=PKCS12",
        f"ssl.truststore.location={security.ca.p12}",
        f"ssl.truststore.password={security.store_password}",
    ]
    if listener == "ssl":
        from harness.kafka_dist.security import PRINCIPAL_MAPPING_RULES

        sets += ["ssl.client.auth=required", f"ssl.principal.mapping.rules={PRINCIPAL_MAPPING_RULES}"]
    else:
        from harness.kafka_dist.security import PLAIN_LOGIN, password_of

        sets += [
            f"sasl.enabled.mechanisms={MECHANISM}",
            f"listener.name.{listener}.plain.sasl.jaas.config="
            f'{PLAIN_LOGIN} required user_{USER}="{password_of(USER)}";',
        ]
    return sets


@dataclass
class Server:
    name: str
    port: int
    pid: int
    client: SecuredClient


@contextmanager
def servers(listener: str, workdir: Path, progress: Callable[[str], None]) -> Iterator[list[Server]]:
    """A Kafka 4.x node and a groupshift with one listener of type `listener` each, stopped after."""
    from bench.kafka_reference import KAFKA_EXTRA, KAFKA_HB_SETTINGS
    from e2e.harness import GatewayProcess
    from harness.kafka_dist import KafkaCluster

    secured = listener != "plaintext"
    configs = {**KAFKA_HB_SETTINGS, **KAFKA_EXTRA}
    if secured:
        configs["authorizer.class.name"] = ""  # no authorizer: groupshift's default
    progress(f"{listener}: starting Kafka and groupshift")
    cluster = KafkaCluster(
        "4",
        configs=configs,
        workdir=workdir / "kafka",
        security=listener if secured else None,
        sasl_mechanism=MECHANISM,
    )
    cluster.start()
    gw = None
    try:
        client = SecuredClient()
        if cluster.security is not None:
            client = SecuredClient(cluster.security.client_security(USER))
        gw = GatewayProcess.start(
            workdir / "gs", sets=[*hb.SETTINGS, *groupshift_sets(listener, cluster.security)]
        )
        kafka_pid = cluster.pid(0)
        assert kafka_pid is not None
        ports = gw.events("gateway.listening")[-1].get("ports") or {}
        gw_port = int(ports.get(listener.upper(), gw.port)) if secured else gw.port
        yield [
            Server("kafka", cluster.port(0), kafka_pid, client),
            Server("groupshift", gw_port, gw.proc.pid, client),
        ]
    finally:
        if gw is not None:
            gw.stop(timeout=60)
        cluster.stop()


def measure(args: argparse.Namespace, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """One row per listener type and backend (see the module's docstring)."""
    from bench.kafka_reference import coordinators_ready, pin_all_threads

    rows: list[dict[str, Any]] = []
    connections, depth = args.load
    for listener in args.security:
        with (
            tempfile.TemporaryDirectory(prefix=f"groupshift-secure-{listener}-") as tmp,
            servers(listener, Path(tmp), progress) as pair,
        ):
            try:
                group_ids = [f"bench-hb-{g}" for g in range(args.groups)]
                steady = {}
                for s in pair:
                    coordinators_ready(s.port, group_ids, s.client)
                    progress(f"{listener}: setup on {s.name} ({args.members} members)")
                    steady[s.name] = hb.setup(
                        s.port, "ConsumerGroupHeartbeat", args.groups, args.members, connect=s.client
                    )
                for s in pair:
                    pin_all_threads(s.pid, "0")
                os.sched_setaffinity(0, {1})
                results: dict[str, dict[str, list[dict[str, Any]]]] = {
                    s.name: {"heartbeats": [], "connections": []} for s in pair
                }
                for _ in range(args.repeats):
                    for s in pair:
                        try:
                            r = hb.run_load(
                                s.port,
                                "ConsumerGroupHeartbeat",
                                steady[s.name],
                                args.groups,
                                connections,
                                depth,
                                args.seconds,
                                gateway_pid=s.pid,
                                connect=s.client,
                            ).as_dict()
                        except (RuntimeError, TimeoutError, ConnectionError, EOFError) as e:
                            r = {"requests_per_s": 0, "error": str(e)}
                        results[s.name]["heartbeats"].append(r)
                        progress(f"{listener:<9} {s.name:<10} CGH {r['requests_per_s']:>7}/s {_cpu(r)}")
                    for s in pair:
                        try:
                            c = connection_rate(s.client, s.port, args.workers, args.seconds, s.pid).as_dict()
                        except (RuntimeError, TimeoutError, OSError, EOFError) as e:
                            c = {"connections_per_s": 0, "error": str(e)}
                        results[s.name]["connections"].append(c)
                        progress(f"{listener:<9} {s.name:<10} new {c['connections_per_s']:>7}/s {_cpu(c)}")
                for s in pair:
                    rows.append(
                        {
                            "listener": listener.upper(),
                            "server": s.name,
                            "negotiated": s.client.negotiated(s.port),
                            "failed_runs": sum(
                                "error" in r
                                for r in results[s.name]["heartbeats"] + results[s.name]["connections"]
                            ),
                            "heartbeats": results[s.name]["heartbeats"],
                            "connections": results[s.name]["connections"],
                            "heartbeats_per_s": _best(results[s.name]["heartbeats"], "requests_per_s"),
                            "heartbeats_per_cpu_s": _best(
                                results[s.name]["heartbeats"], "requests_per_gateway_cpu_s"
                            ),
                            "connections_per_s": _best(results[s.name]["connections"], "connections_per_s"),
                            "connections_per_cpu_s": _best(
                                results[s.name]["connections"], "connections_per_server_cpu_s"
                            ),
                        }
                    )
            finally:
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    _ratios(rows)
    return rows


def _cpu(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"ERROR {r['error']}"
    server = r.get("gateway_cpu_share", r.get("server_cpu_share"))
    return f"(server CPU {server}, load generator CPU {r['load_cpu_share']})"


def _best(runs: list[dict[str, Any]], key: str) -> int | None:
    """The best of the runs that completed (other jobs on the machine only ever lower a rate);
    None if none did. A failed run stays in the row's runs with its error, and is counted."""
    rates = [r[key] for r in runs if "error" not in r and r.get(key) is not None]
    return int(max(rates)) if rates else None


def _ratio(a: int | None, b: int | None) -> float | None:
    return None if not a or not b else round(a / b, 2)


def _ratios(rows: list[dict[str, Any]]) -> None:
    """groupshift/Kafka on each listener type; each server's rate relative to its PLAINTEXT."""
    by = {(r["listener"], r["server"]): r for r in rows}
    for r in rows:
        other = by.get((r["listener"], "kafka"))
        plain = by.get(("PLAINTEXT", r["server"]))
        for key in ("heartbeats_per_s", "heartbeats_per_cpu_s", "connections_per_s", "connections_per_cpu_s"):
            if r["server"] == "groupshift" and other is not None:
                r[f"{key}_vs_kafka"] = _ratio(r[key], other[key])
            if plain is not None:
                r[f"{key}_vs_plaintext"] = _ratio(r[key], plain[key])


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "\nlisteners: best of the runs. /s: rate; /CPU-s: per second of the server's CPU (the figure"
        "\nthe machine's load moves least); xPLAIN: the server's own figure over its PLAINTEXT one;"
        "\ngs/k: groupshift's over Kafka's on the same listener type; load CPU: the load generator's"
    )
    head = "".join(f"{h:>9}" for h in ("/s", "xPLAIN", "gs/k", "/CPU-s", "xPLAIN", "gs/k"))
    print(f"{'':<23}{'ConsumerGroupHeartbeat':^54}{'new connections':^54}")
    print(f"{'listener':<11}{'server':<12}{head}{head}  load CPU  negotiated")
    for r in rows:
        cells = ""
        for key in ("heartbeats_per_s", "heartbeats_per_cpu_s", "connections_per_s", "connections_per_cpu_s"):
            cells += f"{r[key]!s:>9}{r.get(key + '_vs_plaintext')!s:>9}{r.get(key + '_vs_kafka', '')!s:>9}"
        load = max((x.get("load_cpu_share") or 0) for x in r["heartbeats"] + r["connections"])
        failed = f"  ({r['failed_runs']} failed runs)" if r.get("failed_runs") else ""
        print(f"{r['listener']:<11}{r['server']:<12}{cells}  {load:>8}  {r['negotiated']}{failed}")


def add_arguments(p: argparse.ArgumentParser, *, security_default: str | None) -> None:
    p.add_argument(
        "--security",
        type=listener_types,
        default=None if security_default is None else listener_types(security_default),
        metavar="TYPE,...",
        help=f"listener types to compare ({','.join(LISTENER_TYPES)}); PLAINTEXT is always included",
    )
    p.add_argument("--workers", type=int, default=8, help="concurrent connection loops for new connections/s")
    p.add_argument("--repeats", type=int, default=2, help="alternating runs per backend and listener type")
    p.add_argument(
        "--listener-load",
        dest="listener_load",
        type=hb.load_shape,
        default=(64, 4),
        metavar="CONNxDEPTH",
        help="heartbeat load shape of the listener comparison",
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.secure_listeners", description=__doc__)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--members", type=int, default=1000)
    p.add_argument("--groups", type=int, default=10)
    p.add_argument("--seconds", type=float, default=3.0, help="per run")
    add_arguments(p, security_default=",".join(LISTENER_TYPES))
    args = p.parse_args(argv)
    args.load = args.listener_load
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    from bench.kafka_reference import KAFKA_SERVER_JVM_OPTS

    os.environ.setdefault("GROUPSHIFT_KAFKA_JVM_OPTS", KAFKA_SERVER_JVM_OPTS)
    from harness.kafka_dist import resolve

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    doc: dict[str, Any] = {
        "benchmark": "secure_listeners",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "kafka_version": resolve("4").version,
        "command": "python -m bench.secure_listeners " + " ".join(argv if argv is not None else sys.argv[1:]),
        "listeners": measure(args, progress),
        "load_average_after": os.getloadavg(),
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print(f"groupshift vs Apache Kafka {doc['kafka_version']}, {doc['date']}, load {doc['load_average']}")
        print_table(doc["listeners"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
