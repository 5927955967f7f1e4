(function () {
  "use strict";
  // Refreshes the page's live part in place every cycle, without a reload: the search box and
  // the reader's scroll position stay. Relative URLs, so a reverse proxy's path prefix works.
  var live = document.getElementById("live");
  var note = document.getElementById("refresh-note");
  var every = Math.max(5, Number(document.body.getAttribute("data-refresh")) || 30) * 1000;
  function refresh() {
    if (document.hidden) { return; }
    fetch("cluster" + location.search, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh) { live.innerHTML = fresh.innerHTML; }
        note.textContent = "Updated " + new Date().toLocaleTimeString() + ".";
      })
      .catch(function () {
        note.textContent = "Could not reach quotad at " + new Date().toLocaleTimeString() + ": the numbers below may be old.";
      });
  }
  setInterval(refresh, every);
}());
