"""Wake-ups: tell idle workers at once that a schedule may have become due sooner.

A worker sleeps until the next due time (capped by ``POLL_MAX_SECONDS``). On PostgreSQL a
change also wakes it at once:

* **Sending.** Every ``Schedule.save()`` that leaves the row with a ``next_run_at`` (create,
  edit, enable, trigger, code-declared sync, and a plain ``Schedule.objects.create()`` in
  user code) runs ``SELECT pg_notify(channel, '<schedule id>')`` on the same connection, so
  inside the same transaction when there is one (connected by the app config to
  ``post_save``, see :func:`schedule_saved`). PostgreSQL delivers a notification only when
  that transaction commits and drops it on rollback; identical notifications of one
  transaction are delivered once. Saves that leave no ``next_run_at`` (disable, cancel)
  send nothing. ``QuerySet.update()`` and raw SQL send nothing either: the poll cap still
  bounds how late a worker sees them, so correctness never depends on a notification.
* **Listening.** A worker starts a :class:`PostgresListener`: a daemon thread with its own
  autocommit psycopg connection (not Django's) that ``LISTEN``s on the channel and calls
  the worker's ``on_wakeup`` for each notification, which ends the worker's sleep. A lost
  connection is logged and retried with backoff (0.5 s doubling to 5 s); meanwhile the
  worker simply polls. After a reconnection it wakes the worker once, since a change may
  have been missed. Signals never wait on it: the worker's sleep stays interruptible as
  before, and :meth:`PostgresListener.stop` returns within ``LISTEN_TICK_SECONDS``.

Other databases get :class:`Listener` (does nothing) and the capped poll. Setting
``DURABLE_SCHEDULES["NOTIFY_CHANNEL"]`` to ``None`` (or ``""``) turns both sides off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import connections

from ..conf import app_settings
from . import sockets

logger = logging.getLogger(__name__)

#: How often the listening thread checks whether it was asked to stop (seconds).
LISTEN_TICK_SECONDS = 0.25
#: Longest wait between two reconnection attempts (seconds).
RECONNECT_MAX_SECONDS = 5.0  # as POLL_MAX_SECONDS: wake-ups resume soon after an outage
#: Longest wait in :meth:`PostgresListener.start` for the first LISTEN (seconds).
START_WAIT_SECONDS = 5.0


def channel() -> str | None:
    """The NOTIFY channel (``DURABLE_SCHEDULES["NOTIFY_CHANNEL"]``), or None when off."""
    return app_settings.NOTIFY_CHANNEL or None


def notify(schedule_id: Any, *, using: str = "default") -> bool:
    """Queue a wake-up for ``schedule_id`` on connection ``using`` (PostgreSQL only; one
    ``SELECT pg_notify``). Delivered when the current transaction commits, at once in
    autocommit. Returns whether a notification was queued."""
    name = channel()
    conn = connections[using]
    if name is None or conn.vendor != "postgresql":
        return False
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [name, str(schedule_id)])
    return True


def schedule_saved(sender: Any, instance: Any, using: str, **kwargs: Any) -> None:
    """``post_save`` receiver of :class:`~..models.Schedule`: wake workers when the saved
    row has a next run (a save that leaves none cannot make anything due sooner)."""
    if instance.next_run_at is not None:
        notify(instance.pk, using=using)


class Listener:
    """Wake-up source of databases without LISTEN/NOTIFY: nothing to do, the worker polls."""

    listening = False

    def start(self) -> None:
        """Start listening (no-op)."""

    def stop(self) -> None:
        """Stop listening (no-op)."""


class PostgresListener(Listener):
    """``LISTEN`` on a dedicated autocommit psycopg connection in a daemon thread and call
    ``on_wakeup(payload)`` (payload: the schedule id as text, or None after a reconnection)
    for every notification. Never raises into the worker; ``listening`` tells whether the
    connection is currently up."""

    def __init__(self, using: str, name: str, on_wakeup: Callable[[str | None], None]):
        self.using = using
        self.channel = name
        self.on_wakeup = on_wakeup
        self.listening = False
        self._stop = threading.Event()
        self._first_try = threading.Event()  # the first connection attempt is over
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the listening thread (idempotent) and wait until its first ``LISTEN`` is
        in place or has failed (at most ``START_WAIT_SECONDS``): a worker that starts its
        loop after this misses no notification of a change committed later."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="durable-listen", daemon=True)
            self._thread.start()
            self._first_try.wait(START_WAIT_SECONDS)

    def stop(self) -> None:
        """Ask the thread to stop and wait for it (at most about ``LISTEN_TICK_SECONDS``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(LISTEN_TICK_SECONDS * 4)

    def _connect(self) -> Any:
        import psycopg
        from psycopg import sql

        params = dict(connections[self.using].get_connection_params())
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        # The worker's socket bounds (db/sockets.py) where the user's OPTIONS set none.
        bound = sockets.valid_seconds(app_settings.SOCKET_TIMEOUT_SECONDS)
        if bound is not None:
            for key, value in sockets.connect_options("postgresql", bound).items():
                params.setdefault(key, value)
        params.setdefault("connect_timeout", 5)
        conn = psycopg.connect(**params, autocommit=True)
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        return conn

    def _run(self) -> None:
        failures = 0
        connected_before = False
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._connect()
                self.listening = True
                self._first_try.set()
                if connected_before:
                    logger.info("listening for wake-ups on %r again", self.channel)
                    self.on_wakeup(None)  # a change may have passed while disconnected
                connected_before = True
                failures = 0
                while not self._stop.is_set():
                    for note in conn.notifies(timeout=LISTEN_TICK_SECONDS):
                        self.on_wakeup(note.payload)
            except Exception as exc:  # noqa: BLE001 - never let the listener take the worker down
                failures += 1
                delay = min(RECONNECT_MAX_SECONDS, 0.5 * 2 ** min(failures - 1, 6))
                logger.warning(
                    "wake-up listener on %r lost (%s); polling, reconnecting in %.1fs",
                    self.channel,
                    exc,
                    delay,
                )
                self.listening = False
                self._first_try.set()
                self._stop.wait(delay)
            finally:
                self.listening = False
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001  # pragma: no cover - closing a broken one
                        pass


def listener(using: str, on_wakeup: Callable[[str | None], None]) -> Listener:
    """The wake-up source for database ``using``: a :class:`PostgresListener` on PostgreSQL
    with a channel set and psycopg 3 installed, else the polling :class:`Listener`."""
    name = channel()
    if name is None or connections[using].vendor != "postgresql":
        return Listener()
    try:
        import psycopg  # noqa: F401
    except ImportError:  # psycopg2: no dedicated listener, poll
        logger.info("wake-ups need psycopg 3; polling instead")
        return Listener()
    return PostgresListener(using, name, on_wakeup)
