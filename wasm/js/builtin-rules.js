// Hands the built-in rule pack to the engine (src/lib.rs, `builtin_files`), which calls
// builtinRules() once, on first use. The pack is not embedded in the .wasm: wasm/build.sh
// writes it beside the package's JS as torchdx_rules.js (see wasm/README.md, Size).
//
// wasm-bindgen copies this file to <package>/snippets/torchdx-wasm-<hash>/js/, three
// levels below torchdx_rules.js. This is the ES-module version (wasm/pkg, the page);
// wasm/pkg-node gets its CommonJS twin, builtin-rules.cjs, in its place.
import files from "../../../torchdx_rules.js";

/** The rule files as JSON: `[[name, text], ...]`, in the order core embeds them natively. */
export function builtinRules() {
  return JSON.stringify(files);
}
