from django.contrib import admin

from .models import Digest, Note

admin.site.register(Note)
admin.site.register(Digest)
