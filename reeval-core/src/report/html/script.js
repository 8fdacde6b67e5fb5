// The report's filters: by outcome, by kind, by words (in the eval's name, the
// harness, the trial, the outcome and the message), and one attempt alone.
// The URL's fragment holds the view (#outcome=fail&kind=assertion&q=readme,
// #attempt=<id>), so a filtered view can be linked and reloaded.
(function () {
  "use strict";
  var $ = function (s) { return document.querySelector(s); };
  var outcome = $("#f-outcome"), kind = $("#f-kind"), q = $("#f-q"), count = $("#f-count");
  var evals = Array.prototype.slice.call(document.querySelectorAll("details.eval"));
  var focus = "";

  function attemptsOf(e) {
    return Array.prototype.slice.call(e.querySelectorAll("details.attempt"));
  }

  function read() {
    var p = new URLSearchParams(location.hash.slice(1));
    outcome.value = p.get("outcome") || "";
    kind.value = p.get("kind") || "";
    q.value = p.get("q") || "";
    focus = p.get("attempt") || "";
  }

  function write() {
    var p = new URLSearchParams();
    if (outcome.value) p.set("outcome", outcome.value);
    if (kind.value) p.set("kind", kind.value);
    if (q.value) p.set("q", q.value);
    if (focus) p.set("attempt", focus);
    var hash = p.toString();
    history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }

  function apply() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean);
    var filtering = !!(outcome.value || kind.value || words.length || focus);
    var shown = 0, total = 0, groups = 0;
    evals.forEach(function (e) {
      var any = false;
      attemptsOf(e).forEach(function (a) {
        total++;
        var show = focus
          ? a.id === "attempt-" + focus
          : (!outcome.value || a.dataset.outcome === outcome.value) &&
            (!kind.value || a.dataset.kind === kind.value) &&
            words.every(function (w) { return a.dataset.search.indexOf(w) >= 0; });
        a.hidden = !show;
        if (show) { shown++; any = true; }
        if (focus) {
          a.open = show;
          // One attempt alone is opened whole: its tries' steps too.
          if (show) a.querySelectorAll(".step > details").forEach(function (d) { d.open = true; });
        }
      });
      e.hidden = !any;
      if (any) groups++;
      // A filtered view opens the groups it shows; the overview has them collapsed.
      e.open = filtering && any;
    });
    count.textContent = filtering
      ? "showing " + shown + " of " + total + " attempts in " + groups + " of " + evals.length + " evals"
      : total + " attempts in " + evals.length + " evals";
    if (focus) {
      var a = document.getElementById("attempt-" + focus);
      if (a) a.scrollIntoView();
    }
  }

  function changed() {
    focus = "";
    write();
    apply();
  }

  [outcome, kind].forEach(function (el) { el.addEventListener("change", changed); });
  q.addEventListener("input", changed);
  $("#f-clear").addEventListener("click", function () {
    outcome.value = kind.value = q.value = "";
    changed();
  });
  $("#f-open").addEventListener("click", function () {
    evals.forEach(function (e) { if (!e.hidden) e.open = true; });
  });
  $("#f-close").addEventListener("click", function () {
    evals.forEach(function (e) { e.open = false; });
  });
  window.addEventListener("hashchange", function () { read(); apply(); });
  // "/" goes to the search, as on most sites.
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== q) {
      e.preventDefault();
      q.focus();
    }
  });
  read();
  apply();
})();
