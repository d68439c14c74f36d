// Draw the server-built plotly figures (json_script "figures-data") into their containers. On a narrow
// screen a legend beside or over the plot would squash it: it moves below, and the chart grows to hold it.
(function () {
  "use strict";
  const NARROW_PX = 600;
  const LEGEND_ROW_PX = 22;

  function fitted(element, layout, traces) {
    if (element.clientWidth >= NARROW_PX || layout.showlegend === false) return layout;
    const named = traces.filter((t) => t.showlegend !== false && t.name).length;
    const rows = Math.ceil(named / 2);
    const margin = Object.assign({}, layout.margin, { l: 52, r: 12, b: 56 + rows * LEGEND_ROW_PX });
    return Object.assign({}, layout, {
      legend: { orientation: "h", x: 0, xanchor: "left", y: -0.12, yanchor: "top", font: { size: 11 } },
      margin: margin,
      height: (layout.height || 360) + rows * LEGEND_ROW_PX,
    });
  }

  const data = document.getElementById("figures-data");
  if (!data || !window.Plotly) return;
  const figures = JSON.parse(data.textContent);
  for (const [id, figure] of Object.entries(figures)) {
    const element = document.getElementById(id);
    if (!element) continue;
    const layout = fitted(element, figure.layout, figure.data);
    Plotly.newPlot(element, figure.data, layout, { responsive: true, displaylogo: false });
  }
})();
