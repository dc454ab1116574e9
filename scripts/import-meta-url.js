// import.meta.url for our modules in the CommonJS bundle (scripts/bundle.mjs injects it): the bundle's own
// URL, from which they find the package and the addon.
export const spmdModuleUrl = require("node:url").pathToFileURL(__filename).href;
