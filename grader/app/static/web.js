/* Progressive enhancement only: every page works without this file.
   - the status box polls its JSON endpoint and reloads the page once grading has finished; the header's badge
     follows the same status field, and the checks decided so far are listed under the box as they come;
   - line charts get a hover readout (the server already drew them as SVG);
   - a table too wide for the screen scrolls in its box, which then takes keyboard focus (arrow keys scroll it);
   - the outcome of a form (the manual grades' "Saved" or "Nothing was saved") takes focus where it is shown.
   Filters never apply on change (WCAG 3.2.2): the Filter button, or Enter, submits them. */
(function () {
  "use strict";

  function pollStatus(box) {
    var url = box.getAttribute("data-status-url");
    var every = Math.max(0.5, parseFloat(box.getAttribute("data-poll-s")) || 2) * 1000;
    var text = box.querySelector(".status-text");
    var note = box.querySelector(".refresh-note");
    var last = box.className;
    var failures = 0;
    if (note) note.textContent = "Updates live.";
    function tick() {
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (s) {
          failures = 0;
          text.textContent = s.text;
          box.className = "status-box s-" + s.status;
          box.setAttribute("data-status", s.status);
          liveBadges(s.status);  // one status source: the box and the header's badge never disagree
          liveVerdicts(s.verdicts || []);
          if (s.finished) { window.location.reload(); return; }
          last = box.className;
          setTimeout(tick, every);
        })
        .catch(function () {
          failures += 1;  // the server restarting, a network blip: slow down, keep trying
          if (note) note.textContent = "Lost contact; retrying…";
          setTimeout(tick, Math.min(30000, every * Math.pow(2, failures)));
        });
    }
    setTimeout(tick, every);
  }

  function badge(status, text) {
    var b = document.createElement("span");
    b.className = "badge s-" + status;
    b.textContent = text || status;
    return b;
  }

  function liveBadges(status) {
    Array.prototype.forEach.call(document.querySelectorAll("[data-live-status]"), function (b) {
      b.className = "badge s-" + status;
      b.textContent = status;
    });
  }

  // The same list the server renders in the status_box macro: a badge, the check's title, its message.
  function liveVerdicts(verdicts) {
    var list = document.querySelector("[data-live-verdicts]");
    if (!list || list.children.length === verdicts.length) return;  // unchanged: nothing re-announced
    while (list.firstChild) list.removeChild(list.firstChild);
    verdicts.forEach(function (c) {
      var li = document.createElement("li"), title = document.createElement("strong");
      var message = document.createElement("span");
      li.className = "live-verdict s-" + c.status;
      title.textContent = c.title;
      message.className = "muted";
      message.textContent = c.message;
      li.appendChild(badge(c.status, c.badge));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(title);
      li.appendChild(document.createTextNode(" "));
      li.appendChild(message);
      list.appendChild(li);
    });
    list.hidden = verdicts.length === 0;
  }

  var SVGNS = "http://www.w3.org/2000/svg";
  function el(name, attrs) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  function hoverLine(svg) {
    var points;
    try { points = JSON.parse(svg.getAttribute("data-points")); } catch (e) { return; }
    if (!points || !points.length) return;
    var xl = svg.getAttribute("data-x-label") || "x", yl = svg.getAttribute("data-y-label") || "y";
    var vb = svg.viewBox.baseVal;
    var guide = el("line", {"class": "guide", y1: 28, y2: vb.height - 46, visibility: "hidden"});
    var dot = el("circle", {"class": "guide-dot", r: 4, visibility: "hidden"});
    var label = el("text", {"class": "guide-label", visibility: "hidden"});
    svg.appendChild(guide); svg.appendChild(dot); svg.appendChild(label);
    svg.addEventListener("mousemove", function (ev) {
      var ctm = svg.getScreenCTM();
      if (!ctm) return;
      var pt = svg.createSVGPoint();
      pt.x = ev.clientX; pt.y = ev.clientY;
      var p = pt.matrixTransform(ctm.inverse());
      var best = points[0];
      for (var i = 1; i < points.length; i++) {
        if (Math.abs(points[i][0] - p.x) < Math.abs(best[0] - p.x)) best = points[i];
      }
      guide.setAttribute("x1", best[0]); guide.setAttribute("x2", best[0]);
      dot.setAttribute("cx", best[0]); dot.setAttribute("cy", best[1]);
      label.textContent = xl + " " + best[2] + ": " + yl + " " + best[3];
      var right = best[0] > vb.width * 0.6;
      label.setAttribute("x", best[0] + (right ? -8 : 8));
      label.setAttribute("y", Math.max(42, best[1] - 10));
      label.setAttribute("text-anchor", right ? "end" : "start");
      [guide, dot, label].forEach(function (e) { e.setAttribute("visibility", "visible"); });
    });
    svg.addEventListener("mouseleave", function () {
      [guide, dot, label].forEach(function (e) { e.setAttribute("visibility", "hidden"); });
    });
  }

  function scrollBox(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1;
    if (scrolls && !box.hasAttribute("tabindex")) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", (box.getAttribute("data-label") || "Table") + " (scrolls sideways)");
    } else if (!scrolls && box.hasAttribute("tabindex")) {
      ["tabindex", "role", "aria-label"].forEach(function (a) { box.removeAttribute(a); });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    Array.prototype.forEach.call(document.querySelectorAll(".status-box[data-finished='no']"), pollStatus);
    Array.prototype.forEach.call(document.querySelectorAll("svg[data-chart='line']"), hoverLine);
    var boxes = document.querySelectorAll(".table-scroll");
    var fit = function () { Array.prototype.forEach.call(boxes, scrollBox); };
    fit();
    window.addEventListener("resize", fit);
    var outcome = document.querySelector("[data-focus]");
    if (outcome) {  // again once loaded: scrolling to the URL's #fragment may take the focus back to the page
      outcome.focus();
      window.addEventListener("load", function () { if (document.activeElement !== outcome) outcome.focus(); });
    }
  });
})();
