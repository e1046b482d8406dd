"""Template tag libraries: ``durable_schedules_admin``, the admin's HTML fragments."""
