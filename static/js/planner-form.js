// Scenario form: recompute the plan as fields change (debounced POST to the preview view) and show the
// engine's field errors inline. The server renders the headline; this script only swaps it in.
(function () {
  "use strict";
  const form = document.getElementById("scenario-form");
  if (!form) return;
  const url = form.dataset.previewUrl;
  const target = document.getElementById("preview");
  const state = document.getElementById("preview-state");
  const DELAY_MS = 300;
  let timer = null;
  let controller = null;
  let sequence = 0;

  function liveLists() {
    return form.querySelectorAll("ul.errorlist.live");
  }

  // The control a live error list speaks for, and the ids that describe it (help text, then errors).
  function controlOf(list) {
    const field = list.closest(".field");
    return field ? field.querySelector("input, select, textarea") : null;
  }

  function describe(control, withError, list) {
    const ids = (control.getAttribute("aria-describedby") || "").split(/\s+/).filter(
      (id) => id && id !== list.id && !id.endsWith("_error"),
    );
    if (withError) ids.push(list.id);
    if (ids.length) control.setAttribute("aria-describedby", ids.join(" "));
    else control.removeAttribute("aria-describedby");
    if (withError) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  }

  function clearLiveErrors() {
    for (const list of liveLists()) {
      list.replaceChildren();
      list.hidden = true;
      const field = list.closest(".field");
      if (field) field.classList.remove("live-error");
      const control = controlOf(list);
      if (control) describe(control, false, list);
    }
  }

  const EMPTY_HTML = '<p class="muted" id="preview-empty">Pick a model and a GPU: the plan is recomputed as you type.</p>';

  // Without a model or a GPU there is no plan: say so instead of keeping the last one on screen.
  function showEmpty() {
    if (controller) controller.abort();
    sequence++;
    clearLiveErrors();
    target.innerHTML = EMPTY_HTML;
    target.classList.remove("stale");
    state.textContent = "";
    form.dataset.previewState = "empty";
  }

  function showErrors(errors) {
    const fallback = form.querySelector('ul.errorlist.live[data-for="__all__"]');
    for (const [name, messages] of Object.entries(errors)) {
      // Name errors do not stop a preview; they are checked on save.
      if (name === "name") continue;
      const list = form.querySelector('ul.errorlist.live[data-for="' + CSS.escape(name) + '"]') || fallback;
      for (const item of messages) {
        const li = document.createElement("li");
        li.textContent = list === fallback && name !== "__all__" ? name + ": " + item.message : item.message;
        list.appendChild(li);
      }
      list.hidden = false;
      const control = list === fallback ? null : controlOf(list);
      if (control) describe(control, true, list);
      const field = list.closest(".field");
      if (field) {
        field.classList.add("live-error");
        // The live list now speaks for this field: hide the copy rendered with the page.
        for (const stale of field.querySelectorAll("ul.errorlist:not(.live)")) stale.hidden = true;
      }
    }
  }

  // Errors rendered with the page describe the inputs as they were posted; once edited they are stale.
  function hideServerErrors() {
    for (const list of form.querySelectorAll("ul.errorlist:not(.live)")) list.hidden = true;
    for (const field of form.querySelectorAll(".field.has-error")) field.classList.remove("has-error");
  }

  async function recompute() {
    if (!form.elements.model.value || !form.elements.gpu.value) {
      showEmpty();
      return;
    }
    if (controller) controller.abort();
    controller = new AbortController();
    const mine = ++sequence;
    state.textContent = "recomputing…";
    target.classList.add("stale");
    try {
      const response = await fetch(url, {
        method: "POST",
        body: new FormData(form),
        signal: controller.signal,
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const body = await response.json();
      if (mine !== sequence) return;
      clearLiveErrors();
      if (body.ok) {
        target.innerHTML = body.html;
        target.classList.remove("stale");
        state.textContent = "";
        form.dataset.previewState = body.fits ? "fits" : "misses";
      } else {
        showErrors(body.errors || {});
        target.classList.add("stale");
        state.textContent = target.querySelector("#headline")
          ? "fix the highlighted fields: the plan shown is for the last valid inputs"
          : "fix the highlighted fields";
        form.dataset.previewState = "invalid";
      }
    } catch (error) {
      if (error.name !== "AbortError" && mine === sequence) state.textContent = "could not recompute";
    }
  }

  function schedule() {
    hideServerErrors();
    clearTimeout(timer);
    timer = setTimeout(recompute, DELAY_MS);
  }

  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  recompute();
})();
