// Every package the lockfile installs admits the Node versions package.json claims (`engines.node`): a
// dependency that needs a newer Node than we promise breaks `npm ci` there (EBADENGINE) or its users at run time.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import semver from "semver";
import { REPO } from "./helpers/ranks.js";

const read = (file) => JSON.parse(readFileSync(path.join(REPO, file), "utf8"));

/** The newest Node major line checked: the latest released when this was written. */
const NEWEST_MAJOR = 26;

/**
 * The Node versions a range claims, as the lowest release it admits on each major line up to NEWEST_MAJOR
 * and that line's late releases (x.99.0). Concrete versions, not semver.subset: a claim like ">=20.19"
 * is inside "^20 || >=21" as a whole but inside neither half, which subset cannot see.
 */
export function claimedVersions(claimed) {
  const lowest = semver.minVersion(claimed);
  const out = [];
  for (let major = lowest.major; major <= NEWEST_MAJOR; major++) {
    const first = major === lowest.major ? lowest.version : Array.from({ length: 100 }, (_, minor) => `${major}.${minor}.0`).find((v) => semver.satisfies(v, claimed));
    out.push(...[first, `${major}.99.0`].filter((v) => v && semver.satisfies(v, claimed)));
  }
  return out;
}

/** The lockfile's entries whose engines.node leaves out some of the `versions` claimed. */
export function excluding(lock, versions) {
  return Object.entries(lock.packages).flatMap(([name, p]) => {
    const left = typeof p.engines?.node === "string" && name ? versions.filter((v) => !semver.satisfies(v, p.engines.node)) : [];
    return left.length ? [`${name.replace(/^node_modules\//, "")}@${p.version} (node ${p.engines.node}) excludes ${left.join(", ")}`] : [];
  });
}

test("every package in package-lock.json admits the Node versions package.json claims", () => {
  const claimed = read("package.json").engines.node;
  assert.ok(semver.validRange(claimed), `package.json engines.node ${claimed}`);
  assert.deepEqual(excluding(read("package-lock.json"), claimedVersions(claimed)), []);
});

test("the check fails on an entry that needs a newer Node (vega-lite 6 needs 22), not on a union that covers the claim", () => {
  const versions = claimedVersions("^20.19.0 || >=22.12.0");
  assert.deepEqual(versions.slice(0, 4), ["20.19.0", "20.99.0", "22.12.0", "22.99.0"]);
  const lock = { packages: { "": {}, "node_modules/vega-lite": { version: "6.5.0", engines: { node: ">=22" } }, "node_modules/ok": { version: "1.0.0", engines: { node: "^18 || ^20 || >= 21" } } } };
  assert.deepEqual(excluding(lock, versions), ["vega-lite@6.5.0 (node >=22) excludes 20.19.0, 20.99.0"]);
});
