/* The chat page's script (no build step, no inline code: a strict Content-Security-Policy holds).
 *
 * - Asking: posts the question to the API's streamed turn (session cookie + CSRF token), shows the answer as
 *   its deltas arrive, then swaps in the turn as the server draws it, with its markers and cards.
 * - Keys: "n" / "p" move to the next / previous claim card; following a marker focuses its card.
 * Reading needs none of this: markers and cards are plain links and anchors.
 */
(function () {
  "use strict";

  function cards() {
    return Array.prototype.slice.call(document.querySelectorAll(".claim-card"));
  }

  function focusCard(card) {
    if (!card) return;
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "center" });
    if (history.replaceState) history.replaceState(null, "", "#" + card.id);
  }

  function focusTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    var target = document.getElementById(id);
    if (target && target.classList.contains("claim-card")) {
      target.focus({ preventScroll: true });
    } else if (!target && id.indexOf("claim-") === 0) {
      // A deep link to a card the "needs review" filter hides: open the page unfiltered.
      var form = document.getElementById("ask-form");
      if (form && form.dataset.reviewOnly === "1") location.replace(location.pathname + location.hash);
    }
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var tag = (event.target && event.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || event.target.isContentEditable) return;
    if (event.key !== "n" && event.key !== "p") return;
    var all = cards();
    if (!all.length) return;
    var current = all.indexOf(document.activeElement.closest ? document.activeElement.closest(".claim-card") : null);
    if (current < 0) {
      var hashed = document.getElementById(decodeURIComponent(location.hash.slice(1)));
      current = all.indexOf(hashed);
    }
    var next = event.key === "n" ? current + 1 : (current < 0 ? all.length - 1 : current - 1);
    if (next < 0 || next >= all.length) return;
    event.preventDefault();
    focusCard(all[next]);
  });
  window.addEventListener("hashchange", focusTarget);

  // --- Asking a question ---------------------------------------------------------------------------------------

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  function pendingTurn(question) {
    var article = element("article", "turn streaming");
    article.setAttribute("aria-busy", "true");
    var header = element("header", "turn-header");
    var heading = element("h2", "question");
    heading.appendChild(element("span", "label", "Question"));
    heading.appendChild(document.createTextNode(" " + question));
    header.appendChild(heading);
    var verdict = element("div", "verdict tone-info", "Answering\u2026 the claims are checked when the answer ends.");
    header.appendChild(verdict);
    article.appendChild(header);
    var body = element("div", "turn-body");
    var column = element("section", "answer-column");
    var answer = element("div", "answer");
    column.appendChild(answer);
    body.appendChild(column);
    body.appendChild(element("section", "claims-column"));
    article.appendChild(body);
    return { article: article, answer: answer, verdict: verdict };
  }

  // Server-sent events from a fetch() body: "event: <name>\ndata: <json>\n\n", comments start with ":".
  function parseFrames(buffer, onEvent) {
    var frames = buffer.split("\n\n");
    var rest = frames.pop();
    frames.forEach(function (frame) {
      var name = "message", data = "";
      frame.split("\n").forEach(function (line) {
        if (line.indexOf("event:") === 0) name = line.slice(6).trim();
        else if (line.indexOf("data:") === 0) data += line.slice(5).trim();
      });
      if (data) onEvent(name, JSON.parse(data));
    });
    return rest;
  }

  function errorText(body, status) {
    if (body && typeof body.detail === "string") return body.detail;
    if (body && body.content) return [].concat(body.content).join(" ");
    return "The question could not be asked (HTTP " + status + ").";
  }

  function setup() {
    focusTarget();
    var printButton = document.getElementById("print-page");
    if (printButton) {
      printButton.hidden = false;
      printButton.addEventListener("click", function () { window.print(); });
    }
    var form = document.getElementById("ask-form");
    if (!form || !window.fetch || !window.TextDecoder) return;
    form.hidden = false;
    var note = document.getElementById("ask-needs-js");
    if (note) note.hidden = true;
    var textarea = form.querySelector("textarea");
    var button = form.querySelector("button[type=submit]");
    var status = document.getElementById("ask-status");
    var turns = document.getElementById("turns");
    var csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;

    function say(text, isError) {
      status.textContent = text;
      status.classList.toggle("error", Boolean(isError));
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var question = textarea.value.trim();
      if (!question) return;
      button.disabled = true;
      say("Asking\u2026");
      var empty = document.getElementById("no-turns");
      if (empty) empty.remove();
      var pending = pendingTurn(question);
      turns.appendChild(pending.article);
      var messageId = null, failed = null;

      fetch(form.dataset.streamUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrf },
        body: JSON.stringify({ content: question })
      }).then(function (response) {
        if (!response.ok) {
          return response.json().catch(function () { return null; }).then(function (body) {
            throw new Error(errorText(body, response.status));
          });
        }
        var reader = response.body.getReader();
        var decoder = new TextDecoder();
        var buffer = "";
        function onEvent(name, data) {
          if (name === "start") { messageId = data.message_id; say("Answering\u2026"); }
          else if (name === "delta") { pending.answer.textContent += data.text; }
          else if (name === "tool_call") { say("Consulting " + data.tool.replace(/_/g, " ") + "\u2026"); }
          else if (name === "tool_result") { say("Answering\u2026"); }
          else if (name === "error") { failed = data.detail || data.code; }
          else if (name === "done") { messageId = data.message_id; say("Checking the claims\u2026"); }
        }
        function pump() {
          return reader.read().then(function (chunk) {
            if (chunk.done) return;
            buffer = parseFrames(buffer + decoder.decode(chunk.value, { stream: true }), onEvent);
            return pump();
          });
        }
        return pump();
      }).then(function () {
        if (!messageId) throw new Error("The answer did not start.");
        var url = form.dataset.turnUrl.replace("00000000-0000-0000-0000-000000000000", messageId);
        return fetch(url, { credentials: "same-origin" }).then(function (response) {
          if (!response.ok) throw new Error("The answer ended, but its claims could not be shown (HTTP " + response.status + ").");
          return response.text();
        });
      }).then(function (html) {
        var holder = document.createElement("template");
        holder.innerHTML = html.trim();
        var drawn = holder.content.firstElementChild;
        pending.article.replaceWith(drawn);
        textarea.value = "";
        var review = drawn.querySelectorAll(".claim-card").length;
        var verdict = drawn.querySelector(".verdict strong");
        say((failed ? "The assistant stopped: " + failed + ". " : "") + "Answer complete. " + (verdict ? verdict.textContent : "") +
            " (" + review + " claim" + (review === 1 ? "" : "s") + ")", Boolean(failed));
      }).catch(function (error) {
        pending.article.classList.remove("streaming");
        pending.verdict.textContent = error.message;
        pending.verdict.className = "verdict tone-fail";
        say(error.message, true);
      }).then(function () {
        button.disabled = false;
        pending.article.removeAttribute("aria-busy");
      });
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
