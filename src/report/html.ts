import type { DoctorResult, ResultDocument } from "../results.js";

export const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

function doctorOutliers(d: DoctorResult): string {
  const items = d.outliers.map((o) => (o.kind === "link" ? `link ${o.hosts.join(" ↔ ")}: ${o.gbps.toFixed(3)} GB/s` : `host ${o.host}: ${o.why}`));
  return `<h2>Doctor: outliers below ${d.threshold} of the median</h2>\n<ul>${items.map((i) => `<li>${escape(i)}</li>`).join("") || "<li>none</li>"}</ul>\n`;
}

/** A self-contained report.html: charts inlined as SVG, the table, the comms summary; no network. */
export async function formatHtml(doc: ResultDocument, table: string, summary: string): Promise<string> {
  // Loaded here, not at start-up: vega costs every rank some 150 ms of CPU and only rank 0 draws charts.
  const { renderCharts, renderDoctorCharts } = await import("./charts.js");
  const charts = [...(await renderCharts(doc.results)), ...(doc.doctor ? await renderDoctorCharts(doc.doctor) : [])];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escape(doc.job)} — spmd-runner report</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; background: #fff; }
  h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
  .charts { display: flex; flex-wrap: wrap; gap: 1.5rem; }
  pre { background: #f6f6f6; padding: 1rem; overflow-x: auto; font-size: 0.8rem; }
</style>
</head>
<body>
<h1>${escape(doc.job)}: ${doc.world_size} ranks, backend ${escape(doc.backend)}</h1>
<p>spmd-runner ${escape(doc.version)} · average bus bandwidth ${doc.average_bus_bandwidth.toFixed(4)} GB/s</p>
<div class="charts">
${charts.map((svg) => `<figure>${svg}</figure>`).join("\n")}
</div>
${doc.doctor ? doctorOutliers(doc.doctor) : ""}<h2>Results</h2>
<pre>${escape(table)}</pre>
<h2>Comms summary</h2>
<pre>${escape(summary)}</pre>
</body>
</html>
`;
}
