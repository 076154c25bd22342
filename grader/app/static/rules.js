/* Progressive enhancement of the submit page: the late notice the server wrote (grader/app/rules_text.py late_notice)
   is kept up to date while the page stays open, with the same words and the same arithmetic as rubric/policy.py
   late_penalty: each started day after the deadline and its grace costs per-day, at most max. */
(function () {
  "use strict";
  var DAY = 86400000;

  function percent(fraction) {
    return (fraction * 100).toFixed(1).replace(/\.?0+$/, "") + "%";
  }

  function minutes(n) {
    return String(n) + " minute" + (n === 1 ? "" : "s");
  }

  function notice(el, now) {
    var deadline = Date.parse(el.getAttribute("data-deadline"));
    var grace = parseFloat(el.getAttribute("data-grace")) || 0;
    var perDay = parseFloat(el.getAttribute("data-per-day")) || 0;
    var max = parseFloat(el.getAttribute("data-max"));
    if (isNaN(deadline) || now <= deadline) return "";
    var late = now - deadline - grace * 60000;
    if (late <= 0) return "The deadline has passed, but you are within the " + minutes(grace) +
      " of grace: this upload loses nothing.";
    var days = Math.ceil(late / DAY);
    var head = "This upload is " + days + " day" + (days === 1 ? "" : "s") + " late";
    var fraction = Math.min(max, Math.round(days * perDay * 1e12) / 1e12);
    if (!fraction) return head + ": late uploads are accepted without a penalty.";
    var capped = fraction >= max && days * perDay > fraction ? " (the most a late upload can lose)" : "";
    return head + ": it loses " + percent(fraction) + " of its score" + capped + ".";
  }

  function update() {
    var now = Date.now();
    document.querySelectorAll("[data-late-notice]").forEach(function (el) {
      var text = notice(el, now);
      if (text && el.textContent !== text) el.textContent = text;
      el.hidden = !text;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    update();
    setInterval(update, 30000);
  });
})();
