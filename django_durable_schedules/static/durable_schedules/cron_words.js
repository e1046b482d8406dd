/* django-durable-schedules: the cron and rrule fields of a schedule's form say their
   expression in words as you type ("At 09:00, Monday through Friday", "every 2 weeks on
   Tuesday at 09:00"), asking the admin's describe-cron and describe-rrule views, which use
   the same libraries and validation as the server. A rule's words follow the zone and the
   start typed on the same form (a rule takes its times of day from its start). */
(function () {
  "use strict";

  function watch(input) {
    var out = document.getElementById(input.id + "_words");
    var zone = document.getElementById("id_timezone");
    var start = document.getElementById("id_start_at");
    var timer = null;
    var asked = 0;

    function describe() {
      var mine = ++asked;
      var url = input.dataset.wordsUrl + "?" + input.name + "=" + encodeURIComponent(input.value) +
        "&timezone=" + encodeURIComponent(zone ? zone.value : "") +
        "&start_at=" + encodeURIComponent(start ? start.value : "");
      fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
        .then(function (response) { return response.json(); })
        .then(function (body) {
          if (mine !== asked) {
            return;  // a later keystroke asked again
          }
          out.textContent = body.error || body.words || "";
          out.classList.toggle("dds-cron-error", Boolean(body.error));
        })
        .catch(function () {});
    }

    function later() {
      clearTimeout(timer);
      timer = setTimeout(describe, 250);
    }

    input.addEventListener("input", later);
    // A rule takes its times from the start, in the zone: the words follow both as typed.
    [zone, start].forEach(function (field) {
      if (field) {
        field.addEventListener("input", function () { if (input.value) { later(); } });
        field.addEventListener("change", function () { if (input.value) { later(); } });
      }
    });
  }

  window.addEventListener("load", function () {
    document.querySelectorAll("input[data-words-url]").forEach(watch);
  });
})();
