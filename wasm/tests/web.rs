//! Tests of the package's Rust side. Natively (`cargo test -p torchdx-wasm`) they check the
//! engine cache and the JSON functions; on wasm32 the same tests run through
//! wasm-bindgen-test (in Node, or in Chromium with WASM_BINDGEN_USE_BROWSER=1), plus the
//! tests of the JS boundary (objects, thrown errors). The runner does not ship the
//! `torchdx_rules.js` the packages load the built-in pack from, so the test build embeds it
//! (feature `embedded-rules`):
//!
//! ```sh
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test --target wasm32-unknown-unknown -p torchdx-wasm --features embedded-rules --test web
//! ```

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use torchdx_wasm::{diagnose_json_with, engine_for, rules_json_with, DiagnoseOptions, ExtraRuleFile};

const DEVICE_LOG: &str = r#"Traceback (most recent call last):
  File "/home/user/project/train.py", line 42, in <module>
    loss = loss_fn(out, labels)
           ^^^^^^^^^^^^^^^^^^^^
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1787, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:0! (when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)
"#;

#[test]
fn builtin_json_equals_core() {
    let ours = diagnose_json_with(DEVICE_LOG, &DiagnoseOptions::default()).unwrap();
    let core = torchdx_core::Engine::builtin().diagnose(DEVICE_LOG).to_json();
    assert_eq!(ours, core);
    assert!(ours.contains("\"schema\": \"torchdx/report@1\""), "{ours}");
}

#[test]
fn builtin_engine_is_cached() {
    let a = engine_for(&DiagnoseOptions::default()).unwrap();
    let b = engine_for(&DiagnoseOptions::default()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
}

#[test]
fn bad_extra_pack_reports_file_line_col() {
    let options = DiagnoseOptions {
        rules: vec![ExtraRuleFile { name: "broken.toml".into(), text: "id = \"broken\"\nthis is not toml\n".into() }],
    };
    let err = diagnose_json_with("x", &options).unwrap_err();
    assert!(err.starts_with("broken.toml:"), "{err}");
    let mut parts = err.splitn(4, ':');
    parts.next();
    assert!(parts.next().unwrap().parse::<u32>().is_ok(), "no line in {err}");
    assert!(parts.next().unwrap().parse::<u32>().is_ok(), "no column in {err}");
}

#[test]
fn rules_lists_the_builtin_pack() {
    let json = rules_json_with(&DiagnoseOptions::default()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(value.as_array().is_some_and(|a| !a.is_empty()), "{json}");
}

#[cfg(target_arch = "wasm32")]
mod js {
    use super::DEVICE_LOG;
    use wasm_bindgen::{JsCast, JsValue};
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn get(v: &JsValue, key: &str) -> JsValue {
        js_sys::Reflect::get(v, &key.into()).unwrap()
    }

    #[test]
    fn diagnose_returns_the_contract_object() {
        let report = torchdx_wasm::js_diagnose(DEVICE_LOG, None).unwrap();
        assert_eq!(get(&report, "schema").as_string().as_deref(), Some("torchdx/report@1"));
        let findings: js_sys::Array = get(&report, "findings").dyn_into().unwrap();
        assert!(findings.length() >= 1);
        // Evidence is a plain object (not a Map), as in the JSON.
        let evidence = get(&findings.get(0), "evidence");
        assert!(evidence.is_object() && !evidence.is_instance_of::<js_sys::Map>());
        let json = torchdx_wasm::js_diagnose_json(DEVICE_LOG, None).unwrap();
        let reparsed = js_sys::JSON::stringify(&js_sys::JSON::parse(&json).unwrap()).unwrap();
        assert_eq!(js_sys::JSON::stringify(&report).unwrap(), reparsed);
    }

    #[test]
    fn options_null_and_empty_mean_builtin() {
        let a = torchdx_wasm::js_diagnose_json(DEVICE_LOG, Some(JsValue::NULL.into())).unwrap();
        let empty = js_sys::JSON::parse(r#"{"rules": []}"#).unwrap();
        let b = torchdx_wasm::js_diagnose_json(DEVICE_LOG, Some(empty.into())).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn unknown_option_throws() {
        let bad = js_sys::JSON::parse(r#"{"rule": []}"#).unwrap();
        assert!(torchdx_wasm::js_diagnose_json(DEVICE_LOG, Some(bad.into())).is_err());
    }

    #[test]
    fn explain_unknown_id_is_undefined() {
        assert!(torchdx_wasm::js_explain("no-such-rule-id", None).unwrap().is_undefined());
    }

    #[test]
    fn version_is_core_version() {
        assert_eq!(torchdx_wasm::js_version(), torchdx_core::VERSION);
    }
}
