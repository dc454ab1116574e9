// A page drawn by headless Chromium, checked not to be blank: some ink, and colour where charts are.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { PNG } from "pngjs";

export const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

/** Screenshots `html` into `dir`/report.png and asserts the picture has ink and coloured charts; returns the PNG's path. */
export function assertRenders(html, dir, windowSize = "1200,1400") {
  const png = path.join(dir, "report.png");
  const p = spawnSync(CHROMIUM, [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", `--user-data-dir=${path.join(dir, "profile")}`,
    `--window-size=${windowSize}`, `--screenshot=${png}`, `file://${html}`,
  ], { encoding: "utf8", timeout: 120_000 });
  assert.ok(existsSync(png), `no screenshot: ${p.stderr}`);
  const img = PNG.sync.read(readFileSync(png));
  let ink = 0, colour = 0;
  for (let i = 0; i < img.data.length; i += 4) {
    const [r, g, b] = [img.data[i], img.data[i + 1], img.data[i + 2]];
    if (r < 200 || g < 200 || b < 200) ink++;
    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) colour++;
  }
  const pixels = img.width * img.height;
  assert.ok(ink / pixels > 0.01, `only ${(100 * ink / pixels).toFixed(2)}% of the page has ink`);
  assert.ok(colour > 500, `only ${colour} coloured pixels: the charts did not render`);
  return png;
}
