/* django-durable-schedules: a schedule's form shows the timing fields only for a kind that
   takes them. The kind select says which fields each kind hides (data-kind-hides, a JSON
   object {kind: [field, ...]} set by the form from the model's own list): choosing
   "manual" (no spec: it runs only when triggered) hides the interval, cron, rule, zone,
   run_at, window, max_runs and exclusion calendars. A field holding an error stays in
   sight. When the form is saved, the hidden inputs are emptied, so a value typed before
   the kind changed is not sent. */
(function () {
  "use strict";

  function boxesOf(name) {
    // A field alone on its line is its .form-row; one sharing a line is a .fieldBox.
    return Array.prototype.filter.call(
      document.querySelectorAll(".field-" + name),
      function (el) {
        return el.classList.contains("fieldBox") ||
          (el.classList.contains("form-row") && !el.querySelector(".fieldBox"));
      }
    );
  }

  function toggle(el, mark, hide) {
    // The admin's own class "hidden" (display: none), removed only where this script put
    // it (marked): a row the admin hides itself stays hidden.
    if (hide) {
      el.classList.add("hidden", mark);
    } else if (el.classList.contains(mark)) {
      el.classList.remove("hidden", mark);
    }
  }

  function apply(select, hides) {
    var hidden = hides[select.value] || [];
    Object.keys(hides).forEach(function (kind) {
      hides[kind].forEach(function (name) {
        boxesOf(name).forEach(function (box) {
          var keep = box.classList.contains("errors") || box.querySelector(".errorlist");
          toggle(box, "dds-kind-hidden", hidden.indexOf(name) >= 0 && !keep);
        });
      });
    });
    // A shared line whose every box is hidden goes too.
    document.querySelectorAll(".form-row.form-multiline").forEach(function (row) {
      var boxes = row.querySelectorAll(".fieldBox");
      var all = boxes.length > 0 && Array.prototype.every.call(boxes, function (b) {
        return b.classList.contains("dds-kind-hidden");
      });
      toggle(row, "dds-kind-line-hidden", all);
    });
  }

  function clearHidden() {
    document.querySelectorAll(".dds-kind-hidden").forEach(function (box) {
      var typed = "input:not([type=hidden]):not([type=checkbox]):not([type=radio])" +
        ":not([type=submit]):not([type=button]), textarea";
      box.querySelectorAll(typed).forEach(
        function (input) { input.value = ""; }
      );
      box.querySelectorAll("select[multiple]").forEach(function (select) {
        Array.prototype.forEach.call(select.options, function (option) {
          option.selected = false;
        });
        if (select.id.slice(-3) === "_to") {
          select.innerHTML = "";  // the chosen side of a filter_horizontal widget
        }
      });
    });
  }

  window.addEventListener("load", function () {
    var select = document.getElementById("id_kind");
    if (!select || !select.dataset.kindHides) {
      return;
    }
    var hides = JSON.parse(select.dataset.kindHides);
    select.addEventListener("change", function () { apply(select, hides); });
    apply(select, hides);
    var form = select.form;
    if (form) {
      form.addEventListener("submit", clearHidden);
    }
  });
})();
