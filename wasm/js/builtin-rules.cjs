// CommonJS twin of builtin-rules.js for wasm/pkg-node (see there).
const pack = require("../../../torchdx_rules.js");

/** The precompiled pack, as JSON text. */
exports.builtinRules = function builtinRules() {
  return pack;
};
