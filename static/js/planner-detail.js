// Scenario detail: copy the vllm serve command (planner-charts.js draws the figures).
(function () {
  "use strict";

  for (const button of document.querySelectorAll("button[data-copy-target]")) {
    button.addEventListener("click", async function () {
      const text = document.getElementById(button.dataset.copyTarget).textContent;
      try {
        await navigator.clipboard.writeText(text);
      } catch (error) {
        // Plain-HTTP deployments have no clipboard API: select the text so Ctrl-C works.
        const range = document.createRange();
        range.selectNodeContents(document.getElementById(button.dataset.copyTarget));
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        button.textContent = "Selected: press Ctrl-C";
        return;
      }
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    });
  }
})();
