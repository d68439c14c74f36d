// Scenario list: the compare button works only with 2 to 4 scenarios ticked.
(function () {
  "use strict";
  const form = document.getElementById("compare-form");
  if (!form) return;
  const button = document.getElementById("compare-button");
  const hint = document.getElementById("compare-hint");
  function update() {
    const n = form.querySelectorAll('input[name="ids"]:checked').length;
    button.disabled = n < 2 || n > 4;
    hint.textContent = n > 4 ? "At most 4 scenarios." : n + " ticked; tick 2 to 4 scenarios.";
  }
  form.addEventListener("change", update);
  update();
})();
