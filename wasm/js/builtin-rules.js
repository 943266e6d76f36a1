// Hands the built-in rule pack to the engine (src/lib.rs, `builtin_pack_json`), which
// calls builtinRules() once, on first use. The pack is not embedded in the .wasm:
// wasm/build.sh writes its precompiled form beside the package's JS as torchdx_rules.js
// (`torchdx rules bundle`; see wasm/README.md, Size).
//
// wasm-bindgen copies this file to <package>/snippets/torchdx-wasm-<hash>/js/, three
// levels below torchdx_rules.js. This is the ES-module version (wasm/pkg, the page);
// wasm/pkg-node gets its CommonJS twin, builtin-rules.cjs, in its place.
import pack from "../../../torchdx_rules.js";

/** The precompiled pack, as JSON text. */
export function builtinRules() {
  return pack;
}
