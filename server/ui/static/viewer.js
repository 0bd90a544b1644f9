// Palimpsest's viewer: open a summary in the side panel, expand it to its messages a page at a time.
// The pages work without this script (every summary is a link); it only saves page loads.
"use strict";

(function () {
  const panel = document.getElementById("panel");
  if (!panel) {
    return;
  }
  const partition = panel.dataset.partition;

  async function load(url) {
    const response = await fetch(url, { credentials: "same-origin" });
    const text = await response.text();
    if (!response.ok) {
      const page = new DOMParser().parseFromString(text, "text/html");
      const message = page.getElementById("error");
      throw new Error(message ? message.textContent : response.statusText);
    }
    return text;
  }

  function mark(summaryId) {
    document.querySelectorAll(".selected").forEach((node) => node.classList.remove("selected"));
    const node = document.getElementById("node-" + summaryId);
    if (node) {
      node.classList.add("selected");
    }
    const row = document.querySelector('tr[data-row="' + CSS.escape(summaryId) + '"]');
    if (row) {
      row.classList.add("selected");
    }
  }

  async function open(summaryId) {
    mark(summaryId);
    const query = new URLSearchParams({ p: partition, s: summaryId });
    try {
      panel.innerHTML = await load("/ui/summary?" + query.toString());
    } catch (error) {
      panel.innerHTML = "";
      const p = document.createElement("p");
      p.className = "error";
      p.textContent = error.message;
      panel.appendChild(p);
    }
  }

  async function append(button, url) {
    const target = button.closest(".summary").querySelector(".messages");
    button.disabled = true;
    const html = await load(url);
    button.remove();
    target.insertAdjacentHTML("beforeend", html);
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("[data-summary]");
    if (link) {
      event.preventDefault();
      const summaryId = link.dataset.summary;
      history.replaceState(null, "", "#" + summaryId);
      open(summaryId);
      return;
    }
    const expand = event.target.closest("button[data-expand]");
    if (expand) {
      append(expand, expand.dataset.expand);
      return;
    }
    const more = event.target.closest("button[data-more]");
    if (more) {
      append(more, more.dataset.more);
    }
  });

  const anchor = decodeURIComponent(location.hash.slice(1));
  if (anchor.startsWith("sum_")) {
    open(anchor);
  }
})();
