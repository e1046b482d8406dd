/* django-durable-schedules: the instant fields of a schedule's form (run_at, start_at,
   end_at: wall times in the schedule's zone) say, as they are typed, the instant they will
   be stored as ("As typed: 2027-06-01 09:00:00 JST = 2027-06-01 00:00:00 UTC"), or why it
   cannot be (a time the zone's clocks skip), asking the admin's describe-instant view;
   they ask again when the Timezone field changes. The help text below each field keeps
   what is stored. */
(function () {
  "use strict";

  function watch(input, zone) {
    var out = document.createElement("div");
    out.className = "dds-instant-typed";
    out.setAttribute("aria-live", "polite");
    input.insertAdjacentElement("afterend", out);
    var timer = null;
    var asked = 0;

    function describe() {
      var mine = ++asked;
      if (!input.value) {
        out.textContent = "";
        return;
      }
      var url = input.dataset.instantUrl + "?at=" + encodeURIComponent(input.value) +
        "&timezone=" + encodeURIComponent(zone ? zone.value : "");
      fetch(url, {credentials: "same-origin", headers: {Accept: "application/json"}})
        .then(function (response) { return response.json(); })
        .then(function (body) {
          if (mine !== asked) {
            return;  // asked again meanwhile
          }
          out.textContent = body.error || body.text || "";
          out.classList.toggle("dds-cron-error", Boolean(body.error));
        })
        .catch(function () {});
    }

    function later() {
      clearTimeout(timer);
      timer = setTimeout(describe, 250);
    }

    input.addEventListener("input", later);
    input.addEventListener("change", later);
    if (zone) {
      zone.addEventListener("input", later);
      zone.addEventListener("change", later);
    }
  }

  window.addEventListener("load", function () {
    var zone = document.getElementById("id_timezone");
    document.querySelectorAll("input[data-instant-url]").forEach(function (input) {
      watch(input, zone);
    });
  });
})();
