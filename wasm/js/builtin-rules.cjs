// CommonJS twin of builtin-rules.js for wasm/pkg-node (wasm-bindgen's nodejs target
// require()s its snippets): wasm/build.sh copies it over the snippet there.
"use strict";
const files = require("../../../torchdx_rules.js");

/** The rule files as JSON: `[[name, text], ...]`, in the order core embeds them natively. */
exports.builtinRules = () => JSON.stringify(files);
