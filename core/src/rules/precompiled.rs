//! The pack decoded ahead of time: `{"files": [{"name": ..., "value": ...}, ...]}`, every
//! file of the pack by name, in source order, each TOML document as JSON (written by the
//! `torchdx-rules` build script). serde_json decodes it about three times faster than
//! the TOML parses, and the TOML is still what rule authors write and what errors point
//! into.
//!
//! A file's name says what its value is (a rule, the op table, ...). Natively the value
//! is decoded as it is read, in one pass: `name` comes before `value` in every object
//! (the build script writes keys sorted). Reading each value raw first and decoding it
//! again was 14 of the 86 million instructions of `torchdx diagnose` on an empty log.
//! The `.wasm` keeps that second pass: there every decoder instantiated once more costs
//! tens of KB of the module, and the raw pass reuses the one [`super::pack`] has.

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::pack::{source_kind, SourceKind};
use super::spec::{CodesFile, FamiliesFile, IngestFile, NoticesFile, OpsFile, RuleSpec};

/// One file's value, decoded as its name says.
pub(crate) enum Decoded {
    Rule(Box<RuleSpec>),
    Ops(OpsFile),
    Families(FamiliesFile),
    Notices(NoticesFile),
    Ingest(IngestFile),
    Codes(CodesFile),
}

/// One file: its name and its value.
pub(crate) struct File {
    pub name: String,
    pub value: Decoded,
}

/// The files of a precompiled pack, in order; `None` when the JSON is not one (a value
/// that does not decode, a data file of no known kind), so the caller compiles the
/// TOML instead and gets its located error.
pub(crate) fn files(json: &str) -> Option<Vec<File>> {
    read(json)
}

#[cfg(not(target_arch = "wasm32"))]
fn read(json: &str) -> Option<Vec<File>> {
    #[derive(Deserialize)]
    struct Pack {
        files: Vec<File>,
    }
    serde_json::from_str::<Pack>(json).ok().map(|p| p.files)
}

#[cfg(target_arch = "wasm32")]
fn read(json: &str) -> Option<Vec<File>> {
    #[derive(Deserialize)]
    struct Pack<'a> {
        #[serde(borrow)]
        files: Vec<Raw<'a>>,
    }
    #[derive(Deserialize)]
    struct Raw<'a> {
        name: String,
        #[serde(borrow)]
        value: &'a serde_json::value::RawValue,
    }
    let pack: Pack<'_> = serde_json::from_str(json).ok()?;
    pack.files
        .into_iter()
        .map(|f| {
            let json = f.value.get();
            let value = match source_kind(&f.name) {
                SourceKind::Rule => Decoded::Rule(Box::new(super::pack::decode_known(json)?)),
                SourceKind::Ops => Decoded::Ops(super::pack::decode_known(json)?),
                SourceKind::Families => Decoded::Families(super::pack::decode_known(json)?),
                SourceKind::Notices => Decoded::Notices(super::pack::decode_known(json)?),
                SourceKind::Ingest => Decoded::Ingest(super::pack::decode_known(json)?),
                SourceKind::Codes => Decoded::Codes(super::pack::decode_known(json)?),
                SourceKind::UnknownData => return None,
            };
            Some(File { name: f.name, value })
        })
        .collect()
}

impl<'de> Deserialize<'de> for File {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<File, D::Error> {
        d.deserialize_map(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = File;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a file: its name, then its value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<File, A::Error> {
        let name = match map.next_key::<&str>()? {
            Some("name") => map.next_value::<String>()?,
            _ => return Err(A::Error::custom("a precompiled file starts with its name")),
        };
        if map.next_key::<&str>()? != Some("value") {
            return Err(A::Error::custom("a precompiled file's name is followed by its value"));
        }
        let value = match source_kind(&name) {
            SourceKind::Rule => Decoded::Rule(map.next_value()?),
            SourceKind::Ops => Decoded::Ops(map.next_value()?),
            SourceKind::Families => Decoded::Families(map.next_value()?),
            SourceKind::Notices => Decoded::Notices(map.next_value()?),
            SourceKind::Ingest => Decoded::Ingest(map.next_value()?),
            SourceKind::Codes => Decoded::Codes(map.next_value()?),
            SourceKind::UnknownData => return Err(A::Error::custom("a data file of no known kind")),
        };
        if map.next_key::<&str>()?.is_some() {
            return Err(A::Error::custom("a precompiled file has a name and a value only"));
        }
        Ok(File { name, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a file can be malformed is refused, not taken for something else.
    #[test]
    fn only_a_name_then_a_value_is_a_file() {
        let ok = r#"{"files": [{"name": "data/notices.toml", "value": {}}]}"#;
        let read = files(ok).expect("a name, then a value");
        assert_eq!(read.len(), 1);
        assert!(matches!(read[0].value, Decoded::Notices(_)));
        for bad in [
            r#"{"files": [{"value": {}, "name": "data/notices.toml"}]}"#,
            r#"{"files": [{"name": "data/notices.toml"}]}"#,
            r#"{"files": [{"name": "data/notices.toml", "value": {}, "extra": 1}]}"#,
            r#"{"files": [{"name": "data/unknown.toml", "value": {}}]}"#,
            r#"{"files": [{"name": "data/notices.toml", "value": {"no_such_key": 1}}]}"#,
            r#"{"files": [{"name": "data/notices.toml", "value": {}}"#,
        ] {
            assert!(files(bad).is_none(), "{bad}");
        }
    }
}
