"""Optional integrations; each module needs its own extra (e.g. ``prometheus``)."""
