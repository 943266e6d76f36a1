//! # torchdx-rules
//!
//! The built-in rule pack of [torchdx](https://example.invalid/torchdx): one TOML file per
//! failure (`*.toml`), data files (`data/*.toml`), and their precompiled form.
//!
//! The crate is data, not code: [`SOURCES`] holds every file's text, embedded at compile
//! time, and [`PRECOMPILED`] the same files converted from TOML to JSON by the build
//! script, which `torchdx-core` decodes about three times faster than it parses the
//! TOML (pack load is on every start of the CLI and of the WASM engine). The TOML stays:
//! it is what rule authors write and what a problem's `file:line:col` points into.
//!
//! The build fails when the folder holds no rule file or a file that is not valid TOML,
//! so a packaged crate can never ship an empty or broken pack.
//!
//! [`listing`] is the one definition of which files of a folder belong to a pack and in
//! which order; the CLI and the WASM bundle use it for authors' folders too.

#![deny(missing_docs)]

pub mod listing;
#[cfg(test)]
mod precompile;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/sources.rs"));
}

/// Every file of the pack as `(name, text)`, in pack order ([`listing::order`]). Rule
/// files are named by their file name (`cuda-oom.toml`), data files `data/NAME`.
pub const SOURCES: &[(&str, &str)] = generated::SOURCES;

/// The pack precompiled: `{"files": [{"name": ..., "value": ...}, ...]}` with each file's
/// TOML document as JSON, in the order of [`SOURCES`].
pub const PRECOMPILED: &str = include_str!(concat!(env!("OUT_DIR"), "/pack.json"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pack_is_listed_in_order_and_precompiled_file_by_file() {
        let mut names: Vec<String> = SOURCES.iter().map(|(n, _)| n.to_string()).collect();
        assert!(names.len() > 40, "the built-in pack holds its rules");
        assert!(names.iter().any(|n| n.starts_with("data/")), "and its data files");
        assert!(!names.iter().any(|n| n == listing::MANIFEST));
        let listed = names.clone();
        listing::order(&mut names);
        assert_eq!(names, listed);
        let json: serde_json::Value = serde_json::from_str(PRECOMPILED).expect("JSON");
        let files = json["files"].as_array().expect("files");
        let pre: Vec<&str> = files.iter().map(|f| f["name"].as_str().unwrap_or_default()).collect();
        assert_eq!(pre, listed.iter().map(String::as_str).collect::<Vec<_>>());
    }

    /// The build reads the folder with `precompile::read_folder`: a folder that would
    /// make an empty or broken pack must fail it, with the file and position.
    #[test]
    fn a_folder_without_rules_or_with_a_bad_file_fails_the_build() {
        let dir = std::env::temp_dir().join(format!("torchdx-rules-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        std::fs::write(dir.join("data/ops.toml"), "[[op]]\nnames = []\n").unwrap();
        let e = precompile::read_folder(&dir).err().expect("no rule files");
        assert!(e.contains("no rule files"), "{e}");
        std::fs::write(dir.join("a-rule.toml"), "id = \"a-rule\"\ntitle = [\n").unwrap();
        let e = precompile::read_folder(&dir).err().expect("a bad file");
        assert!(e.contains("a-rule.toml:2:10: unclosed array"), "{e}");
        std::fs::write(dir.join("a-rule.toml"), "id = \"a-rule\"\n").unwrap();
        let files = precompile::read_folder(&dir).expect("a good folder");
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a-rule.toml", "data/ops.toml"]);
        assert_eq!(files[0].value["id"], "a-rule", "each file's TOML as JSON");
        assert!(files[1].path.ends_with("data/ops.toml"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
