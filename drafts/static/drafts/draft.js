/* The drafts' pages' script (no build step, no inline code: a strict Content-Security-Policy holds).
 *
 * - Upload: posts the draft with stream=1 and shows the findings as the server finds them, each step of their
 *   check and each status as it is final (lines of JSON), then opens the draft's page. Without this script the form posts and the page answers with a redirect.
 * - Table of authorities: "Copy" copies each authority and its pages as plain text, without the statuses.
 * - Print: the report is the page printed (print CSS).
 */
(function () {
  "use strict";

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  // --- A marker followed: its card focused (the card links back) ----------------------------------------------
  function focusTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.classList.contains("claim-card")) target.focus({ preventScroll: true });
  }
  window.addEventListener("hashchange", focusTarget);
  focusTarget();

  // --- The table of authorities, copied ----------------------------------------------------------------------
  function toaText() {
    var lines = [];
    document.querySelectorAll("#toa-text .toa-part").forEach(function (heading) {
      if (lines.length) lines.push("");
      lines.push(heading.textContent.trim());
      var table = heading.nextElementSibling;
      if (!table) return;
      table.querySelectorAll("tbody tr").forEach(function (row) {
        var title = row.querySelector(".toa-title").textContent.trim();
        var pages = row.querySelector(".toa-pages").textContent.trim();
        lines.push(title + "\t" + pages);
      });
    });
    return lines.join("\n") + "\n";
  }

  var copy = document.getElementById("copy-toa");
  if (copy) {
    copy.hidden = false;
    copy.addEventListener("click", function () {
      var status = document.getElementById("copy-status");
      var text = toaText();
      var done = function () { status.textContent = "Copied, without the statuses."; };
      var failed = function () { status.textContent = "Copying is not allowed here: select the table's text instead."; };
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(done, failed);
      } else {
        failed();
      }
    });
  }

  var print = document.getElementById("print-page");
  if (print) {
    print.hidden = false;
    print.addEventListener("click", function () { window.print(); });
  }

  // --- Upload with progress ----------------------------------------------------------------------------------
  var form = document.getElementById("draft-upload");
  if (!form || !window.fetch || !window.TextDecoder) return;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var submit = document.getElementById("draft-submit");
    var box = document.getElementById("draft-progress");
    var status = document.getElementById("draft-progress-status");
    var list = document.getElementById("draft-progress-list");
    var body = new FormData(form);
    body.append("stream", "1");
    submit.disabled = true;
    box.hidden = false;
    status.className = "";
    status.textContent = "Reading the draft…";
    list.textContent = "";
    var items = [];
    var checked = 0;

    function showRefusal(reasons) {
      var field = form.querySelector(".field");
      form.querySelectorAll(".form-error").forEach(function (e) { e.remove(); });
      reasons.forEach(function (reason, index) {
        var error = element("span", "form-error field-error", reason);
        error.id = "draft_file-error-" + (index + 1);
        field.appendChild(error);
      });
      field.classList.add("has-errors");
      box.hidden = true;
      submit.disabled = false;
    }

    function handle(event) {
      if (event.event === "found") {
        status.textContent = "Found " + event.findings.length + " citations and quotations; checking them (the cases at CourtListener if it is configured)…";
        event.findings.forEach(function (finding) {
          var item = element("li", "", (finding.page ? "p. " + finding.page + " · " : "") + finding.kind + ": " + finding.text + " — checking…");
          items.push(item);
          list.appendChild(item);
        });
      } else if (event.event === "step") {
        status.textContent = event.words.charAt(0).toUpperCase() + event.words.slice(1) + " (" + event.count + "); " + checked + " of " + items.length + " final so far…";
      } else if (event.event === "checked") {
        var item = items[event.index];
        if (item) {
          item.textContent = item.textContent.replace(/ — checking…$/, " — " + event.words);
          if (event.needs_review) item.className = "needs-review";
        }
        checked += 1;
        status.textContent = "Checked " + checked + " of " + items.length + "…";
      } else if (event.event === "done") {
        status.textContent = "Checked and recorded. Opening the draft's page…";
        window.location.assign(event.url);
      } else if (event.event === "error") {
        status.className = "error";
        status.textContent = event.detail;
        submit.disabled = false;
      }
    }

    fetch(form.action, { method: "POST", body: body, credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (response) {
        var type = response.headers.get("Content-Type") || "";
        if (type.indexOf("application/x-ndjson") !== 0) {
          // A refused file: the server drew the form again with the reason (400, 413, 429). Show the reason on
          // this page's form, as the page without JavaScript would.
          return response.text().then(function (html) {
            var drawn = new DOMParser().parseFromString(html, "text/html");
            var reasons = Array.prototype.map.call(drawn.querySelectorAll(".form-error"), function (e) { return e.textContent.trim(); });
            showRefusal(reasons.length ? reasons : ["The draft was refused (HTTP " + response.status + ")."]);
          });
        }
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        var buffered = "";
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) return;
            buffered += decoder.decode(chunk.value, { stream: true });
            var lines = buffered.split("\n");
            buffered = lines.pop();
            lines.forEach(function (line) { if (line.trim()) handle(JSON.parse(line)); });
            return pump();
          });
        }
        return pump();
      })
      .catch(function () {
        status.className = "error";
        status.textContent = "The connection was lost. The draft may have been recorded: look at the matter's drafts.";
        submit.disabled = false;
      });
  });
})();
