"""No read or write of a worker's own connection waits for ever (issue 24, 8).

A failover that leaves the old primary's connections half open (apache/airflow#38252), or a
proxy that holds them without forwarding, left the worker blocked in a read until the kernel
gave up (about 15 minutes): no runs meanwhile. ``DURABLE_SCHEDULES["SOCKET_TIMEOUT_SECONDS"]``
bounds every wait of the worker's main-thread connection (db/sockets.py); the worker then
reconnects as after any database error.

The process test puts a TCP proxy written here (threads, 127.0.0.1 only) between a real
``run_scheduler`` and PostgreSQL or MariaDB, lets runs go through it, then freezes every
connection open at that moment (the proxy stops forwarding their bytes and keeps them open)
while new connections still pass: runs resume within seconds.
"""

from __future__ import annotations

import json
import math
import select
import socket
import threading
import time

import pytest
from django.core.checks import Warning as CheckWarning
from django.db import OperationalError, connections
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import checks
from django_durable_schedules.db import sockets
from django_durable_schedules.models import RunReceipt, Schedule

from .conftest import wait_until
from .test_worker_process import log, wait_exit, wait_started

VENDOR = connections["default"].vendor
needs_server = pytest.mark.skipif(VENDOR == "sqlite", reason="SQLite has no socket")

#: The bound the process test gives its worker, and how long it lets runs take to resume.
SOCKET_TIMEOUT = 2
RESUME_WITHIN = 30.0


# ---------------------------------------------------------------------------------------
# the options and the setting
# ---------------------------------------------------------------------------------------


def test_connect_options_for_each_database():
    assert sockets.connect_options("postgresql", 15) == {
        "connect_timeout": 15,
        "keepalives": 1,
        "keepalives_idle": 8,
        "keepalives_interval": 3,
        "keepalives_count": 3,
        "tcp_user_timeout": 15000,
    }
    assert sockets.connect_options("mysql", 2.5) == {
        "connect_timeout": 3,
        "read_timeout": 3,
        "write_timeout": 3,
    }
    assert sockets.connect_options("sqlite", 15) == {}
    # Tiny bounds stay valid for the drivers (libpq ignores a connect_timeout below 2).
    assert sockets.connect_options("postgresql", 0.01)["connect_timeout"] == 2
    assert sockets.connect_options("postgresql", 0.01)["keepalives_idle"] == 1


@given(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=5),
    )
)
def test_any_setting_value_is_a_bound_or_none(value):
    """Totality: whatever SOCKET_TIMEOUT_SECONDS holds, the worker gets no bound or a
    positive finite one, and whole, positive driver options."""
    bound = sockets.valid_seconds(value)
    if bound is None:
        return
    assert math.isfinite(bound) and bound > 0
    for vendor in ("postgresql", "mysql"):
        for key, option in sockets.connect_options(vendor, bound).items():
            assert isinstance(option, int) and option >= 1, (vendor, key, option)


def test_the_checks_refuse_a_bad_value_and_warn_below_the_lock_timeout():
    with override_settings(DURABLE_SCHEDULES={"SOCKET_TIMEOUT_SECONDS": "soon"}):
        assert "durable_schedules.E006" in {m.id for m in checks.check_setting_types()}
    with override_settings(
        DURABLE_SCHEDULES={"SOCKET_TIMEOUT_SECONDS": 3, "LOCK_TIMEOUT_SECONDS": 5}
    ):
        warned = [m for m in checks.check_setting_types() if m.id == "durable_schedules.W004"]
        assert len(warned) == 1 and isinstance(warned[0], CheckWarning)
    for fine in ({}, {"SOCKET_TIMEOUT_SECONDS": None}, {"SOCKET_TIMEOUT_SECONDS": 30}):
        with override_settings(DURABLE_SCHEDULES=fine):
            ids = {m.id for m in checks.check_setting_types()}
            assert not ids & {"durable_schedules.E006", "durable_schedules.W004"}, fine


def _in_a_thread(work):
    """Run ``work()`` in a new thread (a connection of its own) and return its result."""
    result: list[object] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # reported below
            failure.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and not failure, failure
    return result[0]


@pytest.mark.django_db(transaction=True)
def test_only_the_bounded_threads_connection_gets_the_options_and_explicit_ones_win():
    shared = connections["default"].settings_dict
    user_options = dict(shared.get("OPTIONS") or {})
    # The user's own value for one option (SQLite has no socket option: its busy timeout).
    explicit = "timeout" if VENDOR == "sqlite" else "connect_timeout"

    def work():
        conn = connections["default"]
        # A copy: the settings dict is shared by threads.
        conn.settings_dict = dict(conn.settings_dict, OPTIONS={**user_options, explicit: 42})
        undo = sockets.bound_sockets("default", 7)
        options = dict(conn.settings_dict["OPTIONS"])
        other = _in_a_thread(lambda: dict(connections["default"].settings_dict["OPTIONS"]))
        conn.ensure_connection()  # opens with the options
        undo()
        return options, other, dict(conn.settings_dict["OPTIONS"])

    options, other, after = _in_a_thread(work)
    assert options == {**sockets.connect_options(VENDOR, 7), **user_options, explicit: 42}
    assert other == user_options  # another thread keeps the user's settings
    assert after == {**user_options, explicit: 42}  # undone
    assert shared.get("OPTIONS", {}) == user_options  # the shared dict never changed


@needs_server
@pytest.mark.django_db(transaction=True)
def test_a_statement_that_gets_no_answer_in_time_raises_and_the_next_reconnects():
    """The bound is real on the database itself: a server that takes longer than the bound
    to answer (a sleep) ends the wait with an OperationalError within about the bound; the
    connection is dropped and the next statement opens a fresh one."""
    sleep = "SELECT pg_sleep(4)" if VENDOR == "postgresql" else "SELECT SLEEP(4)"

    def work():
        conn = connections["default"]
        undo = sockets.bound_sockets("default", 1)
        try:
            conn.ensure_connection()
            started = time.monotonic()
            with pytest.raises(OperationalError) as raised:
                with conn.cursor() as cursor:
                    cursor.execute(sleep)
            waited = time.monotonic() - started
            conn.close()  # what the worker does after a database error
            with conn.cursor() as cursor:
                cursor.execute("SELECT 1")
                answer = cursor.fetchone()[0]
            return waited, str(raised.value), answer
        finally:
            undo()

    waited, message, answer = _in_a_thread(work)
    print(f"a 4 s statement under a 1 s bound gave up after {waited:.2f}s: {message}")
    assert waited < 4  # gave up before the answer came (not a speed assertion on the bound)
    assert answer == 1


# ---------------------------------------------------------------------------------------
# a real worker behind a proxy whose connections freeze
# ---------------------------------------------------------------------------------------


class FreezingProxy:
    """A TCP proxy on 127.0.0.1 to ``(host, port)`` (threads). :meth:`freeze` stops
    forwarding on every connection open at that moment without closing it: bytes sent to
    it are acknowledged by the kernel and never read, as on a connection to a primary that
    is gone behind a proxy or a half-open socket. Connections made later are forwarded."""

    def __init__(self, host: str, port: int):
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                continue
            server.settimeout(None)
            frozen = threading.Event()
            with self._lock:
                self._pairs.append((client, server, frozen))
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst, frozen), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, frozen: threading.Event) -> None:
        try:
            while not self._closed.is_set():
                readable, _, _ = select.select([src], [], [], 0.1)
                if frozen.is_set():
                    return  # stop reading; the sockets stay open
                if not readable:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        for sock in (src, dst):  # one side closed: close both, as a proxy does
            try:
                sock.close()
            except OSError:
                pass

    def freeze(self) -> int:
        """Freeze every connection open now; returns how many."""
        with self._lock:
            for _, _, frozen in self._pairs:
                frozen.set()
            return len(self._pairs)

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        with self._lock:
            for client, server, _ in self._pairs:
                for sock in (client, server):
                    try:
                        sock.close()
                    except OSError:
                        pass


def _url_through(port: int) -> str:
    s = connections["default"].settings_dict
    scheme = "postgres" if VENDOR == "postgresql" else "mysql"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"{scheme}://{s.get('USER') or ''}{password}@127.0.0.1:{port}/{s['NAME']}"


@needs_server
@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_runs_resume_within_seconds_when_the_workers_connections_freeze(start_worker):
    """A schedule runs every second through the proxy, with the worker's connections kept
    (CONN_MAX_AGE=None) and SOCKET_TIMEOUT_SECONDS=2; then every connection open freezes.
    The worker's next statement gets no answer: it gives up after the bound, reconnects
    through the proxy (a new, healthy connection) and runs resume. Without a bound the
    worker would wait in that read for the kernel's timeout (about 15 minutes)."""
    s = connections["default"].settings_dict
    default_port = 5432 if VENDOR == "postgresql" else 3306
    proxy = FreezingProxy(s.get("HOST") or "127.0.0.1", int(s.get("PORT") or default_port))
    try:
        schedule = Schedule.objects.create(
            name="frozen", callback="tests.noop", kind="interval", interval_seconds=1
        )
        receipts = RunReceipt.objects.filter(schedule=schedule, status="succeeded")
        settings = {"SOCKET_TIMEOUT_SECONDS": SOCKET_TIMEOUT, "LOCK_TIMEOUT_SECONDS": 1}
        worker = start_worker(
            "--worker-id",
            "frozen",
            "--max-idle",
            "0.5",
            env={
                "DATABASE_URL": _url_through(proxy.port),
                "DDS_TEST_CONN_MAX_AGE": "none",
                "DDS_TEST_DURABLE_SCHEDULES": json.dumps(settings),
            },
        )
        wait_started("frozen")
        wait_until(lambda: receipts.count() >= 2, 30, message=f"runs\n{log(worker)}")

        frozen = proxy.freeze()
        started = time.monotonic()
        before = receipts.count()
        assert frozen >= 1
        wait_until(
            lambda: receipts.count() >= before + 2,
            RESUME_WITHIN,
            message=f"runs after the freeze ({frozen} connections frozen)\n{log(worker)}",
        )
        resumed = time.monotonic() - started
        print(
            f"{VENDOR}: runs resumed {resumed:.1f}s after {frozen} connections froze"
            f" (SOCKET_TIMEOUT_SECONDS={SOCKET_TIMEOUT}, bound {RESUME_WITHIN:g}s)"
        )
        assert "database error in worker frozen" in worker.output(), log(worker)

        worker.signal()
        assert wait_exit(worker, 20) == 0, log(worker)
    finally:
        proxy.close()
