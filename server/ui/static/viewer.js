// Palimpsest's viewer: load a summary's original messages into its panel, a page at a time.
// Every page reads without this script (summaries, messages and pages are links); it only saves page loads.
"use strict";

(function () {
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

  async function append(button, url) {
    const target = button.closest(".summary").querySelector(".messages");
    button.disabled = true;
    try {
      const html = await load(url);
      button.remove();
      target.insertAdjacentHTML("beforeend", html);
    } catch (error) {
      const p = document.createElement("p");
      p.className = "error";
      p.textContent = error.message;
      target.appendChild(p);
      button.disabled = false;
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-expand], button[data-more]");
    if (button) {
      append(button, button.dataset.expand || button.dataset.more);
    }
  });
})();
