"""The worker's delivery threads (:class:`Deliveries`): one daemon thread per configured
notifier sends that notifier's due notifications (:mod:`..state.deliveries`), so a notifier
that raises or hangs delays only its own deliveries, never another notifier's, a run or a
claim (the main loop never waits for them).

Each send runs in a call thread of the notifier's own and is waited for at most the
notifier's ``timeout``; a send still running then is a failure (retried with backoff), and
the notifier claims nothing more until that call returns (at most one hung call per
notifier). A claim is leased for the notifier's ``timeout`` plus one second per delivery,
plus five seconds (:func:`.state.claim_deliveries`): a worker killed
mid-send leaves deliveries that another worker (or this one restarted) sends once the
lease has expired (at-least-once).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections

from .. import state
from ..conf import app_settings
from ..db import session, sockets
from ..notify.base import Notifier
from ..notify.config import NotifierConfig, configured
from ..state.deliveries import ON_ENQUEUED, ClaimedDelivery

logger = logging.getLogger("django_durable_schedules.notify")

#: Most deliveries one notifier thread claims at once.
CLAIM_BATCH = 10


class Call:
    """One notifier's call thread: runs ``send(notification)`` and lets the caller wait
    for it with a timeout; a call that outlives it keeps the thread (:attr:`busy`)."""

    def __init__(self, name: str):
        self.name = name
        self.thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def run(self, backend: Notifier, claim: ClaimedDelivery, timeout: float) -> str | None:
        """Send ``claim``'s notification; None when it returned within ``timeout`` seconds,
        else the error to record (what it raised, or that it timed out)."""
        result: dict[str, Any] = {}

        def target() -> None:
            try:
                backend.send(claim.notification)
                result["ok"] = True
            except BaseException as exc:  # noqa: BLE001 - any failure of user code
                try:
                    result["error"] = f"{type(exc).__name__}: {exc}"
                except Exception:  # noqa: BLE001 - an exception whose str() raises
                    result["error"] = type(exc).__name__

        self.thread = threading.Thread(target=target, name=f"durable-notify-{self.name}-send")
        self.thread.daemon = True
        self.thread.start()
        self.thread.join(timeout)
        if self.thread.is_alive():
            return f"timed out after {timeout:g}s"
        return None if result.get("ok") else str(result.get("error", "no result"))


class Deliveries:
    """The delivery threads of one worker: :meth:`start` one per valid ``NOTIFIERS``
    entry (none without notifiers); :meth:`stop` asks them to end (never waits for a
    send: a claim not sent is handed back, one mid-send expires and is sent again)."""

    def __init__(self, worker_id: str, using: str = "default"):
        self.worker_id = worker_id
        self.using = using
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start a thread per valid notifier (their backends built there)."""
        self.stopping.clear()
        ON_ENQUEUED.append(self.wake.set)
        for config in configured():
            thread = threading.Thread(
                target=self.serve, args=(config,), name=f"durable-notify-{config.name}"
            )
            thread.daemon = True
            thread.start()
            self.threads.append(thread)
            logger.info("worker %s delivers notifier %r", self.worker_id, config.name)

    def stop(self, wait: float = 1.0) -> None:
        """Ask the threads to end; wait at most ``wait`` seconds for them in all."""
        self.stopping.set()
        self.wake.set()
        if self.wake.set in ON_ENQUEUED:
            ON_ENQUEUED.remove(self.wake.set)
        for thread in self.threads:
            thread.join(wait / max(1, len(self.threads)))
        self.threads = []

    def serve(self, config: NotifierConfig) -> None:
        """One notifier's loop: claim its due deliveries, send each, record the outcome;
        wait up to ``NOTIFY_POLL_SECONDS`` (or until an event is queued) when none is due
        or the database cannot be reached."""
        try:
            backend = config.build()
        except Exception:
            logger.exception("notifier %r cannot be built: it sends nothing", config.name)
            return
        call = Call(config.name)
        # This thread's connection is bounded as the loop's is (no wait for ever).
        unbind = sockets.bound_sockets(self.using, app_settings.SOCKET_TIMEOUT_SECONDS)
        session.limit_lock_waits(self.using, app_settings.LOCK_TIMEOUT_SECONDS)
        try:
            while not self.stopping.is_set():
                try:
                    sent = self.pass_once(config, backend, call)
                except Exception:  # this notifier only: log, wait, go on
                    logger.exception("notifier %r: delivery pass failed", config.name)
                    sent = 0
                if sent == 0:
                    self.wake.wait(app_settings.NOTIFY_POLL_SECONDS)
                    self.wake.clear()
                    close_old_connections()
        finally:
            session.clear_lock_wait_limit(self.using)
            unbind()
            connections.close_all()

    def pass_once(self, config: NotifierConfig, backend: Notifier, call: Call) -> int:
        """Claim and send one batch of ``config``'s due deliveries; returns how many were
        sent (0 when none was due, its call thread is still busy or the database failed)."""
        if call.busy:
            return 0
        try:
            claims = state.claim_deliveries(
                config.name,
                self.worker_id,
                limit=CLAIM_BATCH,
                lease_seconds=backend.timeout + 1.0,
                using=self.using,
            )
        except DatabaseError:
            logger.warning("notifier %r cannot claim deliveries", config.name, exc_info=True)
            connections[self.using].close()
            return 0
        for index, claim in enumerate(claims):
            if self.stopping.is_set() or call.busy:
                self.hand_back(claims[index:])
                break
            error = call.run(backend, claim, backend.timeout)
            self.record(config, claim, error)
        return len(claims)

    def record(self, config: NotifierConfig, claim: ClaimedDelivery, error: str | None) -> None:
        """Write the send's outcome (a database error is logged: the lease expires and the
        delivery is sent again)."""
        n = claim.notification
        try:
            status = state.finish_delivery(claim, error, using=self.using)
        except DatabaseError:
            logger.warning("notifier %r: cannot record delivery %s", config.name, claim.id)
            connections[self.using].close()
            return
        if error is None:
            logger.info("notified %s: %s of %s", config.name, n.event, n.schedule)
        else:
            logger.warning(
                "notifier %r failed (%s) on %s of %s: %s",
                config.name,
                status or "lease lost",
                n.event,
                n.schedule,
                error,
            )

    def hand_back(self, claims: list[ClaimedDelivery]) -> None:
        try:
            state.release_deliveries(claims, using=self.using)
        except DatabaseError:
            connections[self.using].close()  # their leases expire instead
