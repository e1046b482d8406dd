"""The mail notifier (:class:`MailNotifier`), through Django's ``send_mail`` (the project's
``EMAIL_BACKEND``, or on Django 6.1+ one of its ``MAILERS``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

import django
from django.core.mail import send_mail

from .base import Notification, Notifier

DEFAULT_SUBJECT_PREFIX = "[durable schedules] "


class MailNotifier(Notifier):
    """Mails each notification with ``django.core.mail.send_mail``.

    Options: ``to`` (required: a non-empty list of addresses), ``from_email`` (default
    ``DEFAULT_FROM_EMAIL``), ``subject_prefix`` (default ``"[durable schedules] "``),
    ``timeout`` (seconds, default 10: how long the worker waits for the send; the SMTP
    connection's own timeout is ``EMAIL_TIMEOUT``), ``mailer`` (Django 6.1+: the alias of
    the ``MAILERS`` entry to send with; default: the project's default mailer)."""

    option_names: ClassVar[frozenset[str]] = frozenset(
        {"to", "from_email", "subject_prefix", "timeout", "mailer"}
    )

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> list[str]:
        problems = super().check_options(options)
        to = options.get("to")
        if (
            not isinstance(to, (list, tuple))
            or not to
            or not all(isinstance(a, str) and "@" in a for a in to)
        ):
            problems.append("'to' is required: a non-empty list of e-mail addresses")
        for name in ("from_email", "subject_prefix"):
            if name in options and not isinstance(options[name], str):
                problems.append(f"{name!r} must be a string")
        if "mailer" in options:
            if not isinstance(options["mailer"], str) or not options["mailer"]:
                problems.append("'mailer' must be the alias of a MAILERS entry")
            elif django.VERSION < (6, 1):
                problems.append("'mailer' needs Django 6.1 or later (MAILERS)")
        return problems

    def send(self, notification: Notification) -> None:
        """One mail to every ``to`` address; raises what the mail backend raises."""
        prefix = self.options.get("subject_prefix", DEFAULT_SUBJECT_PREFIX)
        subject = f"{prefix}{notification.summary()}".replace("\n", " ")[:250]
        lines = [notification.summary(), ""]
        for key, value in notification.as_json().items():
            if key != "detail":
                lines.append(f"{key}: {value}")
        if notification.detail:
            lines += ["", "detail:", json.dumps(notification.detail, indent=2, sort_keys=True)]
        send_mail(
            subject,
            "\n".join(lines),
            self.options.get("from_email"),
            list(self.options["to"]),
            **({"using": self.options["mailer"]} if "mailer" in self.options else {}),
        )
