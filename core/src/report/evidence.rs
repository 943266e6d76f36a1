//! Evidence: the facts a finding rests on, as the log shows them.
//!
//! The contract reserves eight keys with fixed meanings; they are typed fields here.
//! Every other fact (a rule's own captures such as `tried_bytes`, derived facts such as
//! `dispatch_key`) is kept by name in [`Evidence::extra`]. On the wire it is one JSON
//! object whose keys are in alphabetical order, exactly the map it replaced, so the
//! typed fields change no byte of a report.

use std::collections::BTreeMap;

use serde::de::Deserializer;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A fact in evidence: a reserved key's typed value or an extra value.
#[derive(Clone, Copy, Debug)]
enum Slot<'a> {
    Text(&'a str),
    List(&'a [String]),
    Any(&'a Value),
}

impl Serialize for Slot<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Slot::Text(t) => s.serialize_str(t),
            Slot::List(l) => l.serialize(s),
            Slot::Any(v) => v.serialize(s),
        }
    }
}

/// The facts of one finding. Only what the log shows: a key is absent when the log
/// does not give it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The exception class as printed, without its module (`RuntimeError`).
    pub exception: Option<String>,
    /// The exception message, whitespace-normalised to one line.
    pub message: Option<String>,
    /// Device strings as PyTorch spells them today, in the order the message names them.
    pub devices: Option<Vec<String>>,
    /// The argument the message names (`target`).
    pub argument: Option<String>,
    /// The ATen operator, without codegen wrapper, dispatch key or overload.
    pub op: Option<String>,
    /// The kernel as printed (`wrapper_CUDA_nll_loss_forward`).
    pub kernel: Option<String>,
    /// `basename:line` of the last traceback frame in the user's own code.
    pub failing_frame: Option<String>,
    /// The source line of that frame.
    pub failing_code: Option<String>,
    /// Every other fact, by name: a rule's captures and facts derived from them.
    pub extra: BTreeMap<String, Value>,
}

impl Evidence {
    /// The contract's reserved keys, in the order a report shows them.
    pub const RESERVED: [&'static str; 8] =
        ["exception", "message", "devices", "argument", "op", "kernel", "failing_frame", "failing_code"];

    /// An empty set of facts.
    pub fn new() -> Evidence {
        Evidence::default()
    }

    fn text_field(&self, key: &str) -> Option<&Option<String>> {
        Some(match key {
            "exception" => &self.exception,
            "message" => &self.message,
            "argument" => &self.argument,
            "op" => &self.op,
            "kernel" => &self.kernel,
            "failing_frame" => &self.failing_frame,
            "failing_code" => &self.failing_code,
            _ => return None,
        })
    }

    fn text_field_mut(&mut self, key: &str) -> Option<&mut Option<String>> {
        Some(match key {
            "exception" => &mut self.exception,
            "message" => &mut self.message,
            "argument" => &mut self.argument,
            "op" => &mut self.op,
            "kernel" => &mut self.kernel,
            "failing_frame" => &mut self.failing_frame,
            "failing_code" => &mut self.failing_code,
            _ => return None,
        })
    }

    fn slot(&self, key: &str) -> Option<Slot<'_>> {
        if key == "devices" {
            return self.devices.as_deref().map(Slot::List);
        }
        match self.text_field(key) {
            Some(f) => f.as_deref().map(Slot::Text),
            None => self.extra.get(key).map(Slot::Any),
        }
    }

    /// The value of a fact, reserved or not, as JSON.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.slot(key).map(|s| match s {
            Slot::Text(t) => Value::String(t.to_string()),
            Slot::List(l) => Value::from(l.to_vec()),
            Slot::Any(v) => v.clone(),
        })
    }

    /// A text fact (a reserved text key, or an extra string value).
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.slot(key)? {
            Slot::Text(t) => Some(t),
            Slot::Any(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    /// Whether the fact is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.slot(key).is_some()
    }

    /// Sets a fact. A reserved key takes only its type: text for the text keys (a
    /// number is written as text), a list of strings for `devices`.
    pub fn insert(&mut self, key: &str, value: Value) {
        if key == "devices" {
            self.devices = Some(match value {
                Value::Array(a) => a.iter().map(crate::report::value_text).collect(),
                other => vec![crate::report::value_text(&other)],
            });
            return;
        }
        match self.text_field_mut(key) {
            Some(f) => *f = Some(crate::report::value_text(&value)),
            None => {
                self.extra.insert(key.to_string(), value);
            }
        }
    }

    /// Sets a fact unless it is already present.
    pub fn insert_if_absent(&mut self, key: &str, value: Value) {
        if !self.contains_key(key) {
            self.insert(key, value);
        }
    }

    /// Appends to a list fact (created empty first).
    pub fn push(&mut self, key: &str, value: Value) {
        if key == "devices" {
            self.devices.get_or_insert_with(Vec::new).push(crate::report::value_text(&value));
            return;
        }
        if self.text_field(key).is_some() {
            // A reserved text key holds one value: the first one stays.
            self.insert_if_absent(key, value);
            return;
        }
        if let Value::Array(a) = self.extra.entry(key.to_string()).or_insert_with(|| Value::Array(Vec::new())) {
            a.push(value);
        }
    }

    /// Removes a fact, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let v = self.get(key)?;
        if key == "devices" {
            self.devices = None;
        } else if let Some(f) = self.text_field_mut(key) {
            *f = None;
        } else {
            self.extra.remove(key);
        }
        Some(v)
    }

    /// Every fact by name, in alphabetical order (the JSON order).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Value)> + '_ {
        self.keys().into_iter().filter_map(move |k| self.get(k).map(|v| (k, v)))
    }

    /// The names of the facts present, in alphabetical order.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = Evidence::RESERVED.iter().copied().filter(|k| self.slot(k).is_some()).collect();
        keys.extend(self.extra.keys().map(String::as_str));
        keys.sort_unstable();
        keys
    }

    /// Whether no fact is present.
    pub fn is_empty(&self) -> bool {
        self.keys().is_empty()
    }

    /// The facts as a plain map (for placeholders and conditions).
    pub fn to_map(&self) -> BTreeMap<String, Value> {
        self.iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// Facts from a plain map: reserved keys into their fields.
    pub fn from_map(map: BTreeMap<String, Value>) -> Evidence {
        let mut ev = Evidence::new();
        for (k, v) in map {
            ev.insert(&k, v);
        }
        ev
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let keys = self.keys();
        let mut m = s.serialize_map(Some(keys.len()))?;
        for k in keys {
            if let Some(v) = self.slot(k) {
                m.serialize_entry(k, &v)?;
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Evidence, D::Error> {
        Ok(Evidence::from_map(BTreeMap::deserialize(d)?))
    }
}

/// The wire shape: an object whose reserved keys have their types and whose other keys
/// hold any JSON value.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for Evidence {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Evidence".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let text = |d: &str| serde_json::json!({ "type": "string", "description": d });
        schemars::json_schema!({
            "description": "Only facts the log shows; the reserved keys below have fixed meanings, rules add their own captures.",
            "type": "object",
            "properties": {
                "exception": text("The exception class as printed, without its module."),
                "message": text("The exception message, on one line."),
                "devices": { "type": "array", "items": { "type": "string" }, "description": "Devices in the order the message names them." },
                "argument": text("The argument the message names."),
                "op": text("The ATen operator, without wrapper, dispatch key or overload."),
                "kernel": text("The kernel as printed."),
                "failing_frame": text("basename:line of the last frame in the user's own code."),
                "failing_code": text("The source line of that frame.")
            },
            "additionalProperties": true
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_keys_are_typed_and_the_json_is_the_map_it_replaced() {
        let mut ev = Evidence::new();
        ev.insert("tried_bytes", Value::from(2u64 << 30));
        ev.insert("exception", Value::from("OutOfMemoryError"));
        ev.push("devices", Value::from("cuda:0"));
        ev.push("devices", Value::from("cpu"));
        ev.push("dtypes", Value::from("Float"));
        ev.insert("argument", Value::from("target"));
        assert_eq!(ev.exception.as_deref(), Some("OutOfMemoryError"));
        assert_eq!(ev.devices.as_deref(), Some(&["cuda:0".to_string(), "cpu".to_string()][..]));
        let json = serde_json::to_string(&ev).unwrap();
        let map: BTreeMap<String, Value> = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&map).unwrap(), json, "keys in alphabetical order, as a map");
        assert_eq!(
            json,
            r#"{"argument":"target","devices":["cuda:0","cpu"],"dtypes":["Float"],"exception":"OutOfMemoryError","tried_bytes":2147483648}"#
        );
        let back: Evidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ev);
        assert_eq!(ev.remove("argument"), Some(Value::from("target")));
        assert!(!ev.contains_key("argument"));
    }
}
