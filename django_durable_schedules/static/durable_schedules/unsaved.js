/* django-durable-schedules: a schedule's change page. Its transition buttons (Enable,
   Disable, Trigger now) and the Cancel link leave the page; when the form holds edits that
   were not saved, ask first instead of dropping them silently. */
(function () {
  "use strict";

  function snapshot(form) {
    return new URLSearchParams(new FormData(form)).toString();
  }

  window.addEventListener("load", function () {
    var form = document.getElementById("schedule_form");
    if (!form) {
      return;
    }
    var saved = snapshot(form);
    document.querySelectorAll("[data-dds-transition]").forEach(function (tool) {
      tool.addEventListener("click", function (event) {
        if (snapshot(form) === saved) {
          return;
        }
        var leave = window.confirm(
          "This page has changes that are not saved. " + tool.textContent.trim() +
          " anyway and lose them?\n\nChoose Cancel to stay, then Save your changes first."
        );
        if (!leave) {
          event.preventDefault();
        }
      });
    });
  });
})();
