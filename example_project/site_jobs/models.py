from django.db import models


class Note(models.Model):
    """Something users of the example site write; the digest summarises them."""

    title = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.title


class Digest(models.Model):
    """One digest per occurrence: the idempotency key makes a re-run harmless."""

    idempotency_key = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    note_count = models.PositiveIntegerField()
    text = models.TextField()
