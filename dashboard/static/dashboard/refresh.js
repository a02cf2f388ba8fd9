// Live refresh without a framework: every element with data-refresh-url re-fetches that
// server-rendered fragment every data-refresh-seconds and swaps its content. Pages read the
// same without JavaScript; this only keeps them current. Skipped while the user is typing or
// has chosen something inside the element, so a refresh never eats their input.
(function () {
  "use strict";
  function busy(el) {
    var active = document.activeElement;
    if (active && el.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName)) return true;
    return el.querySelector("input:checked") !== null;
  }
  function start(el) {
    var url = el.getAttribute("data-refresh-url");
    var seconds = parseFloat(el.getAttribute("data-refresh-seconds") || "10");
    var last = null; // the fragment last swapped in: an unchanged one is not swapped again
    function again() { window.setTimeout(tick, seconds * 1000); }
    function tick() {
      if (document.hidden || busy(el)) return again();
      // The next poll is timed from this one's answer, so slow answers never pile up.
      fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html !== null && html !== last) { el.innerHTML = html; last = html; }
        })
        .catch(function () {})
        .then(again);
    }
    again();
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-refresh-url]").forEach(start);
  });
})();
