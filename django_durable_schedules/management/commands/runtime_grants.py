"""``manage.py runtime_grants ROLE``: print the SQL that gives a runtime database role only
what workers, the admin and the API need (see :mod:`...db.roles`); run it as the owner."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from ...db.roles import runtime_grants_sql


class Command(BaseCommand):
    help = (
        "Print the GRANT/REVOKE statements that give ROLE the runtime privileges on this "
        "app's tables (history: SELECT and INSERT only). It prints, it does not execute: run "
        "the output as the role that owns the tables. PostgreSQL, MariaDB and MySQL."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "role",
            help="PostgreSQL role, or MariaDB/MySQL account as in GRANT ('app'@'%%').",
        )
        parser.add_argument("--database", default="default", help="Database alias.")

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        try:
            statements = runtime_grants_sql(
                connection.vendor, options["role"], str(connection.settings_dict.get("NAME") or "")
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for statement in statements:
            self.stdout.write(statement + ";")
