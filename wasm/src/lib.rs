//! torchdx for JavaScript: the diagnosis engine of `torchdx-core`, compiled to WebAssembly.
//!
//! Exports (JS names): `diagnose`, `diagnoseJson`, `diagnoseBytes`, `diagnoseBytesJson`,
//! the streaming `Diagnoser` (`new Diagnoser(options)`, `feed(bytes)`, `finish()`),
//! `explain`, `explainJson`, `explainMarkdown`, `rules`, `version`. They mirror the CLI:
//! `diagnoseJson` is `torchdx diagnose --format json`, `explainJson` is
//! `torchdx explain ID --format json`, `explainMarkdown` is `torchdx explain ID`.
//! Every function except `version` takes an optional last argument
//! `{ rules: [{ name, text }] }`: extra rule files (the TOML text of `rules/*.toml`) added
//! to the builtin pack, a rule with a builtin id replacing it. A pack that does not compile
//! throws a JS `Error` whose message is core's `file:line:col: message`.
//!
//! Objects cross the boundary as JSON text parsed by the JS engine's `JSON.parse`:
//! `diagnose(t)` is by construction the same value as `JSON.parse(diagnoseJson(t))`, and
//! `diagnoseJson` is byte for byte what `torchdx diagnose --format json` prints. That keeps
//! one serializer (core's) for the CLI, Node and the browser, so the contract's field
//! shapes (`null` for absent values, plain objects for evidence maps, key order) cannot
//! differ between them, and it is faster than building the object through
//! serde-wasm-bindgen one property at a time.
//!
//! The builtin engine (rule pack compiled once, with its prefilter) lives in a
//! `thread_local`; the engine for the last extra pack is cached beside it.
//!
//! The built-in rule pack is not embedded in the shipped `.wasm`: `wasm/build.sh` writes
//! its precompiled form (the JSON `torchdx-rules` builds, by `torchdx rules bundle`)
//! beside the module as `torchdx_rules.js`, and the JS snippet `js/builtin-rules.js` hands
//! it to [`builtin_pack_json`] on first use: no TOML is parsed before the first diagnosis,
//! and the `.wasm` downloads without it (see wasm/README.md, Size). Natively, and on
//! wasm32 with the `embedded-rules` feature (the wasm-bindgen tests), it is
//! `torchdx_rules::PRECOMPILED` through core.
//!
//! The TypeScript types of the report and of rule files are generated from their JSON
//! Schemas (`rules/schema/torchdx.d.ts`, written by `torchdx rules schema`); the types of
//! this boundary (options, rule summaries) are declared here.

use std::cell::RefCell;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use torchdx_core::authoring::docs::{explain_markdown, for_reader};
use torchdx_core::{Confidence, Engine, Pack, Rule, RuleSource, SharedDiagnoser};
use wasm_bindgen::prelude::*;

// The report and rule-file types, generated from the JSON Schemas of core's types.
#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = include_str!("../../rules/schema/torchdx.d.ts");

// The types of this boundary.
#[wasm_bindgen(typescript_custom_section)]
const TS_BOUNDARY: &str = r#"
/** Options every function takes (all optional). */
export interface DiagnoseOptions {
  /** Extra rule files added to the built-in pack; a rule whose id is built in replaces it. */
  rules?: ExtraRuleFile[];
}
/** One rule file given as text. */
export interface ExtraRuleFile {
  /** File name used in error locations (`my-rule.toml:12:5: ...`). */
  name: string;
  /** The TOML text of the rule file. */
  text: string;
}
/** One rule of the pack, as `rules()` lists it. */
export interface RuleSummary {
  id: string;
  family: string;
  title: string;
  summary: string;
  collateral: boolean;
  confidence: Confidence;
  source: string;
  /** The message templates the rule matches. */
  templates: string[];
  /** The leading words of each template: what a message must contain to be recognised. */
  leads: string[];
}
"#;

/// Options accepted by every function of the package (all fields optional).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnoseOptions {
    /// Extra rule files added to the builtin rule pack; a rule whose id is already
    /// builtin replaces it. Compiled once and cached while the same files are passed.
    #[serde(default)]
    pub rules: Vec<ExtraRuleFile>,
}

/// One rule file given as text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraRuleFile {
    /// File name used in error locations (`my-rule.toml:12:5: ...`).
    pub name: String,
    /// The TOML text of the rule file.
    pub text: String,
}

/// The built-in rule pack, precompiled (`torchdx_rules.js` beside the package's JS).
#[cfg(all(target_arch = "wasm32", not(feature = "embedded-rules")))]
pub fn builtin_pack_json() -> Result<String, String> {
    #[wasm_bindgen(module = "/js/builtin-rules.js")]
    extern "C" {
        /// `torchdx_rules.js`: the precompiled pack, as JSON text.
        #[wasm_bindgen(js_name = builtinRules)]
        fn builtin_rules_json() -> String;
    }
    Ok(builtin_rules_json())
}

/// The built-in rule pack, precompiled (embedded in this build).
#[cfg(not(all(target_arch = "wasm32", not(feature = "embedded-rules"))))]
pub fn builtin_pack_json() -> Result<String, String> {
    Ok(torchdx_core::builtin_precompiled().to_string())
}

thread_local! {
    /// The built-in pack, decoded once (an extra pack is compiled on top of it).
    static BUILTIN_PACK: Result<Pack, String> = builtin_pack_json().and_then(|json| {
        Pack::from_precompiled_json(&json).ok_or_else(|| "torchdx_rules.js: not the built-in rule pack".to_string())
    });
    static BUILTIN: Result<Arc<Engine>, String> = compile(&[]);
    static EXTRA: RefCell<Option<(Vec<ExtraRuleFile>, Arc<Engine>)>> = const { RefCell::new(None) };
}

/// The built-in pack plus `extra` (a rule with a built-in id replacing it): what
/// `Engine::builtin()` and `Engine::with_extra` build natively.
fn compile(extra: &[ExtraRuleFile]) -> Result<Arc<Engine>, String> {
    BUILTIN_PACK.with(|builtin| {
        let pack = builtin.as_ref().map_err(Clone::clone)?.clone();
        let sources: Vec<RuleSource<'_>> = extra.iter().map(|f| RuleSource { name: &f.name, text: &f.text }).collect();
        let pack = if sources.is_empty() { pack } else { pack.with(&sources).map_err(|e| e.to_string())? };
        Ok(Arc::new(Engine::new(pack)))
    })
}

/// The engine for these options: the builtin one, or builtin + extra rules (cached).
pub fn engine_for(options: &DiagnoseOptions) -> Result<Arc<Engine>, String> {
    if options.rules.is_empty() {
        return BUILTIN.with(Clone::clone);
    }
    EXTRA.with(|cache| {
        if let Some((files, engine)) = &*cache.borrow() {
            if *files == options.rules {
                return Ok(Arc::clone(engine));
            }
        }
        let engine = compile(&options.rules)?;
        *cache.borrow_mut() = Some((options.rules.clone(), Arc::clone(&engine)));
        Ok(engine)
    })
}

/// `diagnose --format json` output for `text` (without the final newline).
pub fn diagnose_json_with(text: &str, options: &DiagnoseOptions) -> Result<String, String> {
    Ok(engine_for(options)?.diagnose(text).to_json())
}

/// The same for raw bytes (a file as read from disk, maybe not UTF-8).
pub fn diagnose_bytes_json_with(bytes: &[u8], options: &DiagnoseOptions) -> Result<String, String> {
    Ok(engine_for(options)?.diagnose_bytes(bytes).to_json())
}

/// One rule of the pack, as `rules()` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleSummary {
    /// Rule id (kebab-case); `explain(id)` gives the whole rule.
    pub id: String,
    /// Family id from the taxonomy.
    pub family: String,
    /// Headline of a finding of this rule, placeholders rendered for a reader.
    pub title: String,
    /// The mechanism in one line, placeholders rendered for a reader.
    pub summary: String,
    /// The message is normally the echo of a failure elsewhere (timeouts, SIGTERMs).
    pub collateral: bool,
    /// Default confidence of a finding.
    pub confidence: Confidence,
    /// The rule file it came from (`rules/cuda-oom.toml`, or the name given in `options.rules`).
    pub source: String,
    /// The message templates the rule matches.
    pub templates: Vec<String>,
    /// The leading words of each template: what a message must contain to be recognised.
    pub leads: Vec<String>,
}

impl RuleSummary {
    fn of(rule: &Rule) -> RuleSummary {
        RuleSummary {
            id: rule.id().to_string(),
            family: rule.family().to_string(),
            title: for_reader(&rule.spec.title),
            summary: for_reader(&rule.spec.summary),
            collateral: rule.spec.collateral,
            confidence: rule.spec.confidence,
            source: rule.source_name.clone(),
            templates: rule.spec.matches.iter().map(|m| m.template.clone()).collect(),
            leads: rule.leads(),
        }
    }
}

/// A rule as JSON: exactly what `torchdx explain ID --format json` prints (without the
/// final newline); `None` for an unknown id.
pub fn explain_json_with(id: &str, options: &DiagnoseOptions) -> Result<Option<String>, String> {
    let engine = engine_for(options)?;
    match engine.pack().rule(id) {
        Some(rule) => serde_json::to_string_pretty(&rule.spec).map(Some).map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

/// A rule's encyclopedia entry as Markdown: what `torchdx explain ID` prints.
pub fn explain_markdown_with(id: &str, options: &DiagnoseOptions) -> Result<Option<String>, String> {
    Ok(engine_for(options)?.pack().rule(id).map(explain_markdown))
}

/// `rules()` as JSON.
pub fn rules_json_with(options: &DiagnoseOptions) -> Result<String, String> {
    let engine = engine_for(options)?;
    let list: Vec<RuleSummary> = engine.pack().rules().iter().map(RuleSummary::of).collect();
    serde_json::to_string(&list).map_err(|e| e.to_string())
}

// ------------------------------------------------------------------ JS boundary

#[wasm_bindgen]
extern "C" {
    /// The options object as JS passes it (typed `DiagnoseOptions` in the .d.ts).
    #[wasm_bindgen(typescript_type = "DiagnoseOptions")]
    pub type JsOptions;
}

fn options_from_js(options: Option<JsOptions>) -> Result<DiagnoseOptions, JsError> {
    install_panic_hook();
    let Some(value) = options.map(JsValue::from).filter(|v| !v.is_undefined() && !v.is_null()) else {
        return Ok(DiagnoseOptions::default());
    };
    let json = js_sys::JSON::stringify(&value)
        .map_err(|_| JsError::new("options: not serializable to JSON"))?
        .as_string()
        .unwrap_or_default();
    serde_json::from_str(&json).map_err(|e| JsError::new(&format!("options: {}", strip_json_position(&e))))
}

/// serde_json appends "at line 1 column 9" (of the stringified options); not useful in JS.
fn strip_json_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn js_err(message: String) -> JsError {
    JsError::new(&message)
}

fn parse(json: &str) -> Result<JsValue, JsError> {
    js_sys::JSON::parse(json).map_err(|_| JsError::new("internal: report JSON did not parse"))
}

#[wasm_bindgen]
extern "C" {
    /// The JS engine's own UTF-8 encoder (a global in browsers, workers and Node).
    type TextEncoder;
    #[wasm_bindgen(constructor)]
    fn new() -> TextEncoder;
    #[wasm_bindgen(method)]
    fn encode(this: &TextEncoder, text: &js_sys::JsString) -> js_sys::Uint8Array;
}

/// A JS string as UTF-8 bytes in wasm memory. wasm-bindgen's glue for a `&str` argument
/// copies the string one UTF-16 unit at a time in JS while it is ASCII: 14% of a 1 MB
/// log's diagnosis in Node. `TextEncoder` encodes natively and one copy brings the bytes
/// in. Lone surrogates become U+FFFD either way, so the bytes are the same.
fn utf8_of(text: &js_sys::JsString) -> Result<Vec<u8>, JsError> {
    if !text.is_string() {
        return Err(JsError::new("text: expected a string (use diagnoseBytes for a Uint8Array)"));
    }
    thread_local!(static ENCODER: TextEncoder = TextEncoder::new());
    Ok(ENCODER.with(|e| e.encode(text)).to_vec())
}

/// Diagnose a log given as text. Returns the report object of the `torchdx/report@1`
/// contract, the same value as `JSON.parse(diagnoseJson(text, options))`.
#[wasm_bindgen(js_name = diagnose, unchecked_return_type = "Report")]
pub fn js_diagnose(
    #[wasm_bindgen(unchecked_param_type = "string")] text: js_sys::JsString,
    options: Option<JsOptions>,
) -> Result<JsValue, JsError> {
    parse(&diagnose_bytes_json_with(&utf8_of(&text)?, &options_from_js(options)?).map_err(js_err)?)
}

/// Diagnose a log given as text. Returns the report as JSON text, byte for byte what
/// `torchdx diagnose --format json` prints (without its final newline).
#[wasm_bindgen(js_name = diagnoseJson)]
pub fn js_diagnose_json(
    #[wasm_bindgen(unchecked_param_type = "string")] text: js_sys::JsString,
    options: Option<JsOptions>,
) -> Result<String, JsError> {
    diagnose_bytes_json_with(&utf8_of(&text)?, &options_from_js(options)?).map_err(js_err)
}

/// Diagnose a log given as bytes (e.g. a dropped file); invalid UTF-8 is handled as the
/// CLI handles it when reading a file.
#[wasm_bindgen(js_name = diagnoseBytes, unchecked_return_type = "Report")]
pub fn js_diagnose_bytes(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
    options: Option<JsOptions>,
) -> Result<JsValue, JsError> {
    let bytes = uint8_array("diagnoseBytes", bytes)?;
    parse(&diagnose_bytes_json_with(&bytes, &options_from_js(options)?).map_err(js_err)?)
}

/// `diagnoseBytes` as JSON text.
#[wasm_bindgen(js_name = diagnoseBytesJson)]
pub fn js_diagnose_bytes_json(
    #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
    options: Option<JsOptions>,
) -> Result<String, JsError> {
    let bytes = uint8_array("diagnoseBytesJson", bytes)?;
    diagnose_bytes_json_with(&bytes, &options_from_js(options)?).map_err(js_err)
}

/// The bytes of a `Uint8Array` argument; anything else (a string, a number, an object
/// that wasm-bindgen would read as no bytes at all) is an error naming the function.
fn uint8_array(func: &str, v: JsValue) -> Result<Vec<u8>, JsError> {
    let a: js_sys::Uint8Array = v.dyn_into().map_err(|_| {
        JsError::new(&format!(
            "{func}: expected a Uint8Array (a string is diagnosed with diagnose; encode text with TextEncoder)"
        ))
    })?;
    Ok(a.to_vec())
}

/// Incremental diagnosis of a log too large to hold in memory (a dropped file read in
/// slices): `const d = new Diagnoser(options)`, `d.feed(bytes)` for each slice,
/// `d.finish()` for the report. Memory stays within the engine's bounds whatever the
/// log's size, and the report is the one `diagnoseBytes` gives for all the bytes at once,
/// however they are sliced.
#[wasm_bindgen(js_name = Diagnoser)]
pub struct JsDiagnoser {
    /// `None` once finished.
    inner: Option<SharedDiagnoser>,
}

#[wasm_bindgen(js_class = Diagnoser)]
impl JsDiagnoser {
    /// Starts a diagnosis with the built-in pack, plus `options.rules`.
    #[wasm_bindgen(constructor)]
    pub fn new(options: Option<JsOptions>) -> Result<JsDiagnoser, JsError> {
        let engine = engine_for(&options_from_js(options)?).map_err(js_err)?;
        Ok(JsDiagnoser { inner: Some(SharedDiagnoser::new(engine)) })
    }

    /// Feeds the next slice of the log (a `Uint8Array`; any size, cut anywhere).
    pub fn feed(&mut self, #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue) -> Result<(), JsError> {
        let bytes = uint8_array("feed", bytes)?;
        let d = self.inner.as_mut().ok_or_else(|| JsError::new("feed: this Diagnoser has finished"))?;
        d.feed(&bytes);
        Ok(())
    }

    /// Ends the log: the report object of the `torchdx/report@1` contract.
    #[wasm_bindgen(unchecked_return_type = "Report")]
    pub fn finish(&mut self) -> Result<JsValue, JsError> {
        parse(&self.finish_json()?)
    }

    /// `finish` as JSON text.
    #[wasm_bindgen(js_name = finishJson)]
    pub fn finish_json(&mut self) -> Result<String, JsError> {
        let d = self.inner.take().ok_or_else(|| JsError::new("finish: this Diagnoser has finished"))?;
        Ok(d.finish().to_json())
    }
}

/// One rule as written in its file (the object `torchdx explain ID --format json`
/// prints), or `undefined` when no rule has this id.
#[wasm_bindgen(js_name = explain, unchecked_return_type = "RuleSpec | undefined")]
pub fn js_explain(id: &str, options: Option<JsOptions>) -> Result<JsValue, JsError> {
    match explain_json_with(id, &options_from_js(options)?).map_err(js_err)? {
        Some(json) => parse(&json),
        None => Ok(JsValue::UNDEFINED),
    }
}

/// `explain` as JSON text, byte for byte `torchdx explain ID --format json` (without the
/// final newline), or `undefined` for an unknown id.
#[wasm_bindgen(js_name = explainJson)]
pub fn js_explain_json(id: &str, options: Option<JsOptions>) -> Result<Option<String>, JsError> {
    explain_json_with(id, &options_from_js(options)?).map_err(js_err)
}

/// A rule's encyclopedia entry as Markdown (what `torchdx explain ID` prints), or
/// `undefined` for an unknown id.
#[wasm_bindgen(js_name = explainMarkdown)]
pub fn js_explain_markdown(id: &str, options: Option<JsOptions>) -> Result<Option<String>, JsError> {
    explain_markdown_with(id, &options_from_js(options)?).map_err(js_err)
}

/// One summary per rule in the pack (builtin, plus `options.rules`).
#[wasm_bindgen(js_name = rules, unchecked_return_type = "RuleSummary[]")]
pub fn js_rules(options: Option<JsOptions>) -> Result<JsValue, JsError> {
    parse(&rules_json_with(&options_from_js(options)?).map_err(js_err)?)
}

/// A raw log line as a terminal shows it: `\r` progress-bar overwrites resolved to the
/// last segment, ANSI codes removed (the same cleaning the engine applies first).
#[wasm_bindgen(js_name = displayLine)]
pub fn js_display_line(raw: &str) -> String {
    torchdx_core::display_line(raw)
}

/// The torchdx version this package was built from.
#[wasm_bindgen(js_name = version)]
pub fn js_version() -> String {
    torchdx_core::VERSION.to_string()
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = error)]
    fn console_error(message: &str);
}

/// Routes Rust panics to `console.error` (once), so an engine bug shows its message
/// instead of a bare "unreachable".
fn install_panic_hook() {
    #[cfg(target_arch = "wasm32")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            std::panic::set_hook(Box::new(|info| console_error(&format!("torchdx panicked: {info}"))));
        });
    }
}
