/* django-durable-schedules: the cron field of a schedule's form says its expression in
   words as you type ("At 09:00, Monday through Friday"), asking the admin's describe-cron
   view, which uses the same library and validation as the server. */
(function () {
  "use strict";

  window.addEventListener("load", function () {
    var input = document.querySelector("input[data-words-url]");
    if (!input) {
      return;
    }
    var out = document.getElementById(input.id + "_words");
    var zone = document.getElementById("id_timezone");
    var timer = null;
    var asked = 0;

    function describe() {
      var mine = ++asked;
      var url = input.dataset.wordsUrl + "?cron=" + encodeURIComponent(input.value) +
        "&timezone=" + encodeURIComponent(zone ? zone.value : "");
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

    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(describe, 250);
    });
  });
})();
