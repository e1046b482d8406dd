"""The REST API (Django REST framework): schedules, their runs, and health.

Include it under any prefix::

    path("api/", include("django_durable_schedules.api.urls"))

Needs the ``api`` extra (``djangorestframework``, ``django-filter``, ``drf-spectacular``) and
``"rest_framework"`` and ``"django_filters"`` in ``INSTALLED_APPS``. Views only validate,
call :mod:`django_durable_schedules.state` /
:mod:`~django_durable_schedules.health`, and shape the answer; see ``docs/api.md``.
"""
