// toolgate console: refreshes the pending approvals without a reload. Served from toolgate; no inline script.
(function () {
  "use strict";
  var list = document.getElementById("pending");
  if (!list) { return; }
  list.setAttribute("data-refresh", "on");
  var version = list.getAttribute("data-version");
  function poll() {
    fetch("/console/api/pending", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || data.version === version) { return null; }
        return fetch("/console/fragment/pending", { credentials: "same-origin" })
          .then(function (response) { return response.ok ? response.text() : null; })
          .then(function (html) {
            if (html === null) { return; }
            // The fragment is rendered (and escaped) by toolgate, like the page itself.
            list.innerHTML = html;
            version = data.version;
            list.setAttribute("data-version", version);
          });
      })
      .catch(function () { /* toolgate stopped or the session ended: keep the page as it is */ });
  }
  window.setInterval(poll, 3000);
})();
