from django.db import models


class SideEffect(models.Model):
    """One row per callback execution: what process tests count to find duplicates/losses."""

    schedule_name = models.CharField(max_length=128)
    occurrence = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
