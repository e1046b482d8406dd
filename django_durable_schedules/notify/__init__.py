"""Alert notifications (``DURABLE_SCHEDULES["NOTIFIERS"]``): the backends and what they
receive.

* :class:`Notifier`: the base class (``send(notification)``; raise on failure);
* :class:`WebhookNotifier`: JSON ``{"event", "schedule", "occurrence", "at", "detail"}``
  POSTed to option ``url``, optionally signed with option ``secret``;
* :class:`ChatWebhookNotifier`: ``{"text": ...}`` for Slack, Mattermost or Teams;
* :class:`MailNotifier`: ``django.core.mail.send_mail`` to option ``to``.

Deliveries are facts first: each alert event inserts one
:class:`~..models.NotificationDelivery` per notifier in its own transaction; workers send
them (:mod:`..worker.deliveries`). See docs/monitoring.md.
"""

from .base import Notification, Notifier
from .mail import MailNotifier
from .webhook import ChatWebhookNotifier, DeliveryFailed, WebhookNotifier

__all__ = [
    "ChatWebhookNotifier",
    "DeliveryFailed",
    "MailNotifier",
    "Notification",
    "Notifier",
    "WebhookNotifier",
]
