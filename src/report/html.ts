import { plural } from "../config/errors.js";
import type { DoctorResult, ResultDocument } from "../results.js";
import { judgedBy, outlierText } from "./doctor.js";
import { interruptedLine, tableParts } from "./table.js";

export const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

function doctorOutliers(d: DoctorResult): string {
  const items = d.outliers.map((o) => `<li>${escape(outlierText(o))}</li>`).join("") || "<li>none</li>";
  return `<h2>Doctor: outliers</h2>\n<p>${escape(judgedBy(d.threshold, d.reference).join(" "))}.</p>\n<ul>${items}</ul>\n`;
}

/** The job's table and comms summary: none for doctor, whose results hold no rows. */
function rowSections(doc: ResultDocument, summary: string): string {
  if (doc.results.length === 0) return "";
  return `<h2>Results</h2>\n${resultsTable(doc)}\n<h2>Comms summary</h2>\n<pre>${escape(summary)}</pre>\n`;
}

/** The results as an HTML table: the text table's columns (units under the titles), rows and closing lines. */
function resultsTable(doc: ResultDocument): string {
  const t = tableParts(doc);
  const cells = (tag: string, values: string[]) => values.map((v, i) => `<${tag}${t.columns[i]!.left ? ' class="l"' : ""}>${escape(v)}</${tag}>`).join("");
  return `<p>${t.head.slice(1).map(escape).join("<br>")}</p>
<table class="results">
<thead><tr>${cells("th", t.columns.map((c) => c.title))}</tr><tr class="unit">${cells("th", t.columns.map((c) => c.unit))}</tr></thead>
<tbody>
${t.rows.map((r) => `<tr>${cells("td", r)}</tr>`).join("\n")}
</tbody>
</table>
<pre>${escape(t.foot.join("\n"))}</pre>`;
}

/** A self-contained report.html: charts inlined as SVG, the results table, the comms summary; no network. */
export async function formatHtml(doc: ResultDocument, summary: string): Promise<string> {
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
  table.results { border-collapse: collapse; font-size: 0.8rem; font-variant-numeric: tabular-nums; }
  table.results th, table.results td { padding: 0.2rem 0.6rem; text-align: right; white-space: nowrap; }
  table.results .l { text-align: left; }
  table.results thead tr.unit th { font-weight: normal; color: #666; border-bottom: 1px solid #999; }
  table.results tbody tr:nth-child(even) { background: #f6f6f6; }
</style>
</head>
<body>
<h1>${escape(doc.job)}: ${plural(doc.world_size, "rank")}, backend ${escape(doc.backend)}</h1>
<p>spmd-runner ${escape(doc.version)}${doc.results.length ? ` · average bus bandwidth ${doc.average_bus_bandwidth.toFixed(4)} GB/s` : ""}</p>
${doc.interrupted ? `<p class="interrupted"><strong>Interrupted</strong> ${escape(interruptedLine(doc.interrupted))}</p>\n` : ""}<div class="charts">
${charts.map((svg) => `<figure>${svg}</figure>`).join("\n")}
</div>
${doc.doctor ? doctorOutliers(doc.doctor) : ""}${rowSections(doc, summary)}</body>
</html>
`;
}
