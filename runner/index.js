#!/usr/bin/env node
// `node runner ...`: the built CLI (npm ci builds dist/).
import "../dist/cli/index.js";
