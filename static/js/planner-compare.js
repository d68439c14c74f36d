// Compare page: draw the overlaid figure the server built.
(function () {
  "use strict";
  const data = document.getElementById("figures-data");
  if (!data || !window.Plotly) return;
  const figures = JSON.parse(data.textContent);
  for (const [id, figure] of Object.entries(figures)) {
    const element = document.getElementById(id);
    if (element) Plotly.newPlot(element, figure.data, figure.layout, { responsive: true, displaylogo: false });
  }
})();
