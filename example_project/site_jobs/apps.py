from django.apps import AppConfig


class SiteJobsConfig(AppConfig):
    name = "site_jobs"
    verbose_name = "Site jobs (example)"
