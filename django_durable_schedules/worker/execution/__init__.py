"""Running one claim: :mod:`.runner` calls its callback and turns what happened into an
``Outcome``; :mod:`.dispatch` hands a task or a command to its engine; :mod:`.isolation`
runs a claim with ``timeout_seconds`` in a child process (:mod:`.isolation_child`) that is
killed at the deadline, :mod:`.placement` choosing which. No transactions here: the
worker writes the outcomes.

Nothing is imported here: a hard-timeout child imports ``.isolation_child`` before
``django.setup()``.
"""
