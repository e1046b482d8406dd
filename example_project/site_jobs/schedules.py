"""Jobs of the example site, declared next to their code (created on migrate/worker start)."""

import random

from django.contrib.sessions.models import Session
from django.utils import timezone

from django_durable_schedules import RetryRun, SkipRun, register

from .models import Digest, Note


@register("sessions.clear_expired", every=3600)
def clear_expired_sessions(ctx):
    """Hourly: what ``manage.py clearsessions`` does, for the database session backend."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return {"deleted": deleted}


@register("notes.demo_writer", every=5)
def write_a_note(ctx):
    """Every 5 s: stands in for users writing notes, so the digest has something to count."""
    note = Note.objects.create(title=f"note from occurrence {ctx.occurrence}")
    return {"note": note.pk}


@register("digest.build", every=15)
def build_digest(ctx):
    """Every 15 s: a digest of the notes written since the previous digest.

    Keyed by the idempotency key, so if a crashed worker's occurrence is re-run after its
    lease expires, the digest is not written twice.
    """
    last = Digest.objects.order_by("-created_at").first()
    notes = Note.objects.all()
    if last:
        notes = notes.filter(created_at__gt=last.created_at)
    count = notes.count()
    if count == 0:
        raise SkipRun("no new notes")
    digest, created = Digest.objects.get_or_create(
        idempotency_key=ctx.idempotency_key,
        defaults={"note_count": count, "text": "\n".join(n.title for n in notes[:50])},
    )
    return {"digest": digest.pk, "notes": count, "created": created}


@register("partner.flaky_import", every=10)
def flaky_import(ctx):
    """Every 10 s: a partner API that fails half the time, to show retries with backoff."""
    if random.random() < 0.5:
        raise RetryRun("partner API answered 503")
    return {"imported": random.randint(1, 20), "attempt": ctx.attempt}


@register("reports.nightly", cron="30 2 * * *", timezone="Europe/Paris")
def nightly_report(ctx):
    """02:30 Paris time every night (on the DST change day it runs at 03:00, once)."""
    return {"notes": Note.objects.count(), "digests": Digest.objects.count()}


from . import engines  # noqa: E402,F401  (command, django.tasks and Celery jobs)
