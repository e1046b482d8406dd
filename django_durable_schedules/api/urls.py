"""URLs of the API; include under any prefix (namespace ``durable_schedules_api``)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from ..probe import probe_view
from . import blackouts, calendars, groups, root, views

app_name = "durable_schedules_api"

router = SimpleRouter()
router.register("schedules", views.ScheduleViewSet, basename="schedule")
router.register("attempts", views.AttemptViewSet, basename="attempt")
router.register("receipts", views.ReceiptViewSet, basename="receipt")
router.register("calendars", calendars.ExclusionCalendarViewSet, basename="calendar")
router.register("blackouts", blackouts.BlackoutWindowViewSet, basename="blackout")
router.register("groups", groups.ConcurrencyGroupViewSet, basename="group")

urlpatterns = [
    path("", root.APIRootView.as_view(), name="api-root"),
    *router.urls,
    path("health/", views.HealthView.as_view(), name="health"),
    # For machines: the fleet's verdict, no schedule names (public unless PROBE_PUBLIC=False).
    path("health/probe/", probe_view, name="health-probe"),
]
