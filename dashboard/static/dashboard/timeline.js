// Drag across a timeline picture to zoom to that range: the page reloads with ?start=&end=.
// The SVG carries its window (data-start, data-end) and axis (data-x0, data-x1) in user
// units; a short press is an ordinary click on a mark. Listeners sit on the document, so a
// picture swapped in by refresh.js works the same.
(function () {
  "use strict";
  var drag = null;
  var dragged = false;
  function frameOf(target) {
    var frame = target.closest ? target.closest("[data-timeline]") : null;
    return frame && frame.querySelector("svg.timeline") ? frame : null;
  }
  function userX(svg, clientX) {
    var box = svg.getBoundingClientRect();
    var width = svg.viewBox.baseVal.width || box.width;
    return ((clientX - box.left) * width) / box.width;
  }
  function instant(svg, x) {
    var x0 = parseFloat(svg.dataset.x0), x1 = parseFloat(svg.dataset.x1);
    var start = Date.parse(svg.dataset.start), end = Date.parse(svg.dataset.end);
    var f = Math.min(Math.max((x - x0) / (x1 - x0), 0), 1);
    return new Date(start + f * (end - start));
  }
  function iso(date) { return date.toISOString().replace(/\.\d{3}Z$/, "Z"); }
  document.addEventListener("mousedown", function (e) {
    var frame = frameOf(e.target);
    if (!frame || e.button !== 0) return;
    var svg = frame.querySelector("svg.timeline");
    var band = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    band.setAttribute("class", "selection");
    band.setAttribute("y", "0");
    band.setAttribute("height", svg.viewBox.baseVal.height);
    band.setAttribute("width", "0");
    svg.appendChild(band);
    drag = { frame: frame, svg: svg, band: band, from: userX(svg, e.clientX), moved: false };
    e.preventDefault(); // no text selection while dragging
  });
  document.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var x = userX(drag.svg, e.clientX);
    if (Math.abs(x - drag.from) > 4) drag.moved = true;
    drag.band.setAttribute("x", Math.min(x, drag.from));
    drag.band.setAttribute("width", Math.abs(x - drag.from));
  });
  document.addEventListener("mouseup", function (e) {
    if (!drag) return;
    var d = drag;
    drag = null;
    d.band.remove();
    if (!d.moved || !d.svg.isConnected) return; // a click (the mark's link works), or refreshed away
    dragged = true;
    var x = userX(d.svg, e.clientX);
    var a = instant(d.svg, Math.min(x, d.from)), b = instant(d.svg, Math.max(x, d.from));
    if (b - a < 1000) b = new Date(a.getTime() + 1000);
    window.location.href = d.frame.dataset.timeline + "?start=" + encodeURIComponent(iso(a)) +
      "&end=" + encodeURIComponent(iso(b));
  });
  document.addEventListener("click", function (e) {
    // The click that ends a drag over a mark must not follow the mark's link.
    if (dragged && frameOf(e.target)) { e.preventDefault(); dragged = false; }
  }, true);
})();
